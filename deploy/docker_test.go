//go:build e2e

package deploy_test

import (
	"encoding/json"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dockerfile is the parsed deploy/docker/Dockerfile: instructions with
// continuation lines joined, by stage.
type dockerfile struct {
	args   map[string]string // ARG before the first FROM
	stages [][]instruction
}

type instruction struct {
	cmd  string // upper case
	rest string
}

func parseDockerfile(t testing.TB, data string) dockerfile {
	t.Helper()
	df := dockerfile{args: map[string]string{}}
	var cur string
	flush := func() {
		line := strings.TrimSpace(cur)
		cur = ""
		if line == "" {
			return
		}
		cmd, rest, _ := strings.Cut(line, " ")
		in := instruction{cmd: strings.ToUpper(cmd), rest: strings.TrimSpace(rest)}
		switch {
		case in.cmd == "FROM":
			df.stages = append(df.stages, nil)
		case len(df.stages) == 0 && in.cmd == "ARG":
			k, v, _ := strings.Cut(in.rest, "=")
			df.args[k] = v
			return
		case len(df.stages) == 0:
			t.Fatalf("Dockerfile: %s before FROM", in.cmd)
		}
		df.stages[len(df.stages)-1] = append(df.stages[len(df.stages)-1], in)
	}
	for line := range strings.Lines(data) {
		line = strings.TrimRight(line, "\r\n")
		if t := strings.TrimSpace(line); cur == "" && (t == "" || strings.HasPrefix(t, "#")) {
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(line), "#") { // a comment inside a continuation
			continue
		}
		if s, ok := strings.CutSuffix(line, "\\"); ok {
			cur += s + " "
			continue
		}
		cur += line
		flush()
	}
	flush()
	return df
}

// execForm parses an instruction in JSON (exec) form.
func execForm(t testing.TB, in instruction) []string {
	t.Helper()
	var out []string
	if err := json.Unmarshal([]byte(in.rest), &out); err != nil {
		t.Fatalf("Dockerfile: %s %s: want the JSON (exec) form, so that chute is PID 1 and gets SIGTERM: %v", in.cmd, in.rest, err)
	}
	return out
}

func TestDockerfile(t *testing.T) {
	df := parseDockerfile(t, string(readRepoFile(t, "deploy/docker/Dockerfile")))
	if len(df.stages) < 2 {
		t.Fatalf("Dockerfile: %d stages, want a build stage and a final stage", len(df.stages))
	}

	// The build stage's Go is the go directive of go.mod.
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(string(readRepoFile(t, "go.mod")))
	if goVersion == nil {
		t.Fatal("go.mod has no go directive")
	}
	if got := df.args["GO_VERSION"]; got != goVersion[1] {
		t.Errorf("Dockerfile: ARG GO_VERSION=%s, want %s (go.mod)", got, goVersion[1])
	}
	build := df.stages[0]
	if from := build[0].rest; !strings.HasPrefix(from, "golang:${GO_VERSION}") {
		t.Errorf("Dockerfile: build stage FROM %s, want golang:${GO_VERSION}...", from)
	}
	var static bool
	for _, in := range build {
		if in.cmd == "RUN" && strings.Contains(in.rest, "CGO_ENABLED=0") && strings.Contains(in.rest, "go build") &&
			strings.Contains(in.rest, "./cmd/chute") {
			static = true
		}
	}
	if !static {
		t.Error("Dockerfile: no RUN CGO_ENABLED=0 go build ... ./cmd/chute: the binary must be static")
	}

	final := df.stages[len(df.stages)-1]
	var entry, cmd []string
	var user, workdir string
	var exposed, volumes []string
	chowned := map[string]string{} // COPY --chown destination -> owner
	for _, in := range final {
		switch in.cmd {
		case "FROM":
			if !strings.Contains(in.rest, "distroless/static") && !strings.HasPrefix(in.rest, "scratch") {
				t.Errorf("Dockerfile: final stage FROM %s: want a small static base (distroless/static or scratch)", in.rest)
			}
		case "USER":
			user = in.rest
		case "ENTRYPOINT":
			entry = execForm(t, in)
		case "CMD":
			cmd = execForm(t, in)
		case "EXPOSE":
			exposed = append(exposed, strings.Fields(in.rest)...)
		case "COPY":
			if !strings.HasPrefix(in.rest, "--from=") {
				t.Errorf("Dockerfile: final stage COPY %s: only from the build stage", in.rest)
			}
			f := strings.Fields(in.rest)
			for _, opt := range f {
				if owner, ok := strings.CutPrefix(opt, "--chown="); ok {
					chowned[path.Clean(f[len(f)-1])] = owner
				}
			}
		case "WORKDIR":
			workdir = path.Clean(in.rest)
		case "VOLUME":
			volumes = append(volumes, in.rest)
		}
	}
	if u, _, _ := strings.Cut(user, ":"); u == "" || u == "0" || u == "root" {
		t.Errorf("Dockerfile: final stage USER %q: want a non-root user", user)
	}
	if len(entry) != 1 || path.Base(entry[0]) != "chute" {
		t.Fatalf("Dockerfile: ENTRYPOINT %q, want the chute binary alone", entry)
	}

	// CMD's listen ports are the exposed ones.
	want := map[string]bool{}
	for _, a := range cmd {
		if m := regexp.MustCompile(`:(\d+)$`).FindStringSubmatch(a); m != nil {
			want[m[1]] = true
			if strings.HasPrefix(a, "--gossip-listen=") {
				want[m[1]+"/udp"] = true
				want[m[1]+"/tcp"] = true
				delete(want, m[1])
			}
		}
	}
	for _, e := range exposed {
		if !want[e] {
			t.Errorf("Dockerfile: EXPOSE %s: no flag of CMD %q listens there", e, cmd)
		}
		delete(want, e)
	}
	for p := range want {
		t.Errorf("Dockerfile: CMD %q listens on %s, which is not exposed", cmd, p)
	}

	// The data dir of CMD is a volume the user owns, and the working
	// directory, where a command line without --data-dir keeps its own.
	dataDir, _ := flagArg(cmd, "data-dir")
	if dataDir == "" {
		t.Fatalf("Dockerfile: CMD %q has no --data-dir", cmd)
	}
	dataDir = path.Clean(dataDir)
	if !slices.ContainsFunc(volumes, func(v string) bool { return v == dataDir || v == `["`+dataDir+`"]` }) {
		t.Errorf("Dockerfile: VOLUME %v, want %s, the data dir of CMD", volumes, dataDir)
	}
	if chowned[dataDir] != user {
		t.Errorf("Dockerfile: %s is owned by %q, want USER %s: a fresh volume copies the owner, and the user must write its raft log", dataDir, chowned[dataDir], user)
	}
	if workdir != dataDir {
		t.Errorf("Dockerfile: WORKDIR %q, want %s: the default data dir <name>.chute goes to the working directory", workdir, dataDir)
	}

	checkLaunch(t, launch{name: "Dockerfile ENTRYPOINT+CMD", args: cmd})
}

// TestDockerignore: the build context keeps what the build needs.
func TestDockerignore(t *testing.T) {
	var patterns []string
	for line := range strings.Lines(string(readRepoFile(t, "deploy/docker/Dockerfile.dockerignore"))) {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, line)
		}
	}
	ignored := func(p string) bool {
		for _, pat := range patterns {
			for _, cand := range []string{pat, strings.TrimPrefix(pat, "**/")} {
				if ok, _ := path.Match(cand, p); ok {
					return true
				}
				if ok, _ := path.Match(cand, path.Base(p)); ok && strings.HasPrefix(pat, "**/") {
					return true
				}
			}
		}
		return false
	}
	// go.mod, go.sum and every Go file of the binary's packages.
	needed := []string{"go.mod", "go.sum"}
	cmd := exec.Command("go", "list", "-deps", "-f", `{{if .Module}}{{if .Module.Main}}{{range .GoFiles}}{{$.Dir}}/{{.}} {{end}}{{end}}{{end}}`, "chute/cmd/chute")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps chute/cmd/chute: %v", err)
	}
	for _, f := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, f)
		if err != nil {
			t.Fatal(err)
		}
		needed = append(needed, filepath.ToSlash(rel))
	}
	if len(needed) < 20 {
		t.Fatalf("go list found only %v", needed)
	}
	for _, p := range needed {
		for dir := p; dir != "."; dir = path.Dir(dir) {
			if ignored(dir) {
				t.Errorf("Dockerfile.dockerignore excludes %s (for %s), which the build needs", dir, p)
			}
		}
	}
	for _, p := range []string{".git", "bin"} {
		if !ignored(p) {
			t.Errorf("Dockerfile.dockerignore keeps %s in the build context", p)
		}
	}
}
