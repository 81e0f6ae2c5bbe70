//go:build e2e

package deploy_test

import (
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// unit is a parsed systemd unit file: section -> key -> values in order.
type unit map[string]map[string][]string

func parseUnit(t testing.TB, data string) unit {
	t.Helper()
	u := unit{}
	section := ""
	n := 0
	for line := range strings.Lines(data) {
		n++
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		case section == "":
			t.Fatalf("chute.service: line %d outside a section", n)
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || strings.HasSuffix(line, "\\") {
				t.Fatalf("chute.service: line %d: want Key=Value on one line: %q", n, line)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	return u
}

func (u unit) get(section, key string) string {
	vs := u[section][key]
	if len(vs) == 0 {
		return ""
	}
	return vs[len(vs)-1]
}

func TestSystemd(t *testing.T) {
	u := parseUnit(t, string(readRepoFile(t, "deploy/systemd/chute.service")))
	for _, s := range []string{"Unit", "Service", "Install"} {
		if u[s] == nil {
			t.Errorf("chute.service: no [%s]", s)
		}
	}
	exec := strings.Fields(u.get("Service", "ExecStart"))
	if len(exec) == 0 || !path.IsAbs(exec[0]) || path.Base(exec[0]) != "chute" {
		t.Fatalf("chute.service: ExecStart %q: want the absolute path of chute", exec)
	}
	envFile := strings.TrimPrefix(u.get("Service", "EnvironmentFile"), "-")
	if envFile == "" {
		t.Fatal("chute.service: no EnvironmentFile")
	}
	if !strings.Contains(u.get("Service", "ExecReload"), "-HUP $MAINPID") {
		t.Errorf("chute.service: ExecReload %q: want kill -HUP $MAINPID (chute re-reads its config on SIGHUP)", u.get("Service", "ExecReload"))
	}
	if ks := u.get("Service", "KillSignal"); ks != "" && ks != "SIGTERM" {
		t.Errorf("chute.service: KillSignal %s: chute leaves gracefully on SIGTERM", ks)
	}
	stop, err := time.ParseDuration(u.get("Service", "TimeoutStopSec") + "s")
	if err != nil || stop < 15*time.Second {
		t.Errorf("chute.service: TimeoutStopSec %q: want at least 15 (shutdown takes up to 10 s)", u.get("Service", "TimeoutStopSec"))
	}
	if u.get("Service", "User") == "" && u.get("Service", "DynamicUser") != "yes" {
		t.Error("chute.service: runs as root; want User= or DynamicUser=yes")
	}
	if code := u.get("Service", "RestartPreventExitStatus"); code != "" {
		if n, err := strconv.Atoi(code); err != nil || n != 2 {
			t.Errorf("chute.service: RestartPreventExitStatus %s: chute's usage error is 2", code)
		}
	}
	if w := u.get("Install", "WantedBy"); w != "multi-user.target" {
		t.Errorf("chute.service: WantedBy %q", w)
	}

	// The install steps in the unit's header copy the example files to the
	// paths the unit reads.
	text := string(readRepoFile(t, "deploy/systemd/chute.service"))
	files := map[string]string{}
	for _, m := range regexp.MustCompile(`install -m \d+ (deploy/systemd/\S+) (/etc/\S+)`).FindAllStringSubmatch(text, -1) {
		files[m[2]] = repoFile(m[1])
	}
	env := parseEnvFile(t, mustRead(t, files[envFile]))
	if files[envFile] == "" {
		t.Errorf("chute.service: no install step puts a file at EnvironmentFile %s", envFile)
	}
	l := launch{name: "systemd ExecStart", args: exec[1:], env: env, files: files}
	if cfg, _ := flagArg(l.args, "config"); files[cfg] == "" {
		t.Errorf("chute.service: no install step puts a file at --config %s", cfg)
	}
	// The data dir is the unit's state directory: the one path
	// ProtectSystem=strict leaves writable, kept across restarts.
	state := u.get("Service", "StateDirectory")
	if dir := dataDirOf(t, l); state == "" || path.Clean(dir) != path.Join("/var/lib", state) {
		t.Errorf("chute.service: StateDirectory %q, data dir %q: want the data dir in /var/lib/<StateDirectory>", state, dir)
	}
	checkLaunch(t, l)
}

// TestExampleConfig: the example config holds every key chute knows, so
// that it documents them all; it loads (TestSystemd starts it).
func TestExampleConfig(t *testing.T) {
	text := string(readRepoFile(t, "deploy/systemd/chute.yaml"))
	for f := range chuteFlags(t).own {
		if f == "config" || f == "version" {
			continue
		}
		key := strings.ReplaceAll(f, "-", "_")
		if !regexp.MustCompile(`(?m)^#?` + key + `:`).MatchString(text) {
			t.Errorf("deploy/systemd/chute.yaml: no key %s (set or commented out)", key)
		}
	}
}
