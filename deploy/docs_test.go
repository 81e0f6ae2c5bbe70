//go:build e2e

package deploy_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// docFiles are the docs a user reads; their chute command lines and links
// are checked.
var docFiles = []string{"README.md", "docs/queues.md", "docs/clickhouse.md", "docs/operations.md", "deploy/README.md"}

func docText(t testing.TB, rel string) string {
	t.Helper()
	return string(readRepoFile(t, rel))
}

// requireMentions fails for each item the doc does not hold in backquotes
// (alone, or at the start of a longer quoted text such as `name{...}`).
func requireMentions(t *testing.T, doc, what string, items []string) {
	t.Helper()
	if len(items) == 0 {
		t.Fatalf("no %s found to check", what)
	}
	text := docText(t, doc)
	for _, it := range items {
		if !strings.Contains(text, "`"+it) {
			t.Errorf("%s does not document the %s `%s`", doc, what, it)
		}
	}
}

// TestDocs_everyFlag: every flag of chute --help, the etcd flags it
// ignores and chute status's flags are in docs/operations.md.
func TestDocs_everyFlag(t *testing.T) {
	fs := chuteFlags(t)
	var own, etcd []string
	for f := range fs.own {
		own = append(own, "--"+f+"`")
	}
	for f := range fs.etcd {
		if f != "experimental-*" {
			etcd = append(etcd, "--"+f+"`")
		}
	}
	requireMentions(t, "docs/operations.md", "flag", own)
	requireMentions(t, "docs/operations.md", "etcd flag", etcd)
	for f := range subcommandFlags(t, "status") {
		if !strings.Contains(docText(t, "docs/operations.md"), "chute status") || !strings.Contains(docText(t, "docs/operations.md"), "--"+f+" ") {
			t.Errorf("docs/operations.md does not document chute status --%s", f)
		}
	}
	for f := range fs.own {
		if f != "config" && f != "version" && !strings.Contains(docText(t, "docs/operations.md"), "`"+strings.ReplaceAll(f, "-", "_")+"`") {
			t.Errorf("docs/operations.md does not give the YAML key of --%s", f)
		}
	}
}

// chuteCommand finds chute command lines in docs: the word chute (or a
// path ending in /chute) as a command, at the start of a line (after a
// "$ " prompt), of inline code, or after a pipe or ;, and its arguments.
var chuteCommand = regexp.MustCompile("(?:^\\s*(?:\\$\\s+)?|`|[|;&]\\s*)(?:\\S*/)?chute((?:[ \\t]+[^\\s|;&`]+)+)")

// TestDocs_commandFlagsExist: every flag on a chute command line of the
// docs is one of chute --help (or of the subcommand's).
func TestDocs_commandFlagsExist(t *testing.T) {
	fs := chuteFlags(t)
	sub := map[string]map[string]bool{"status": subcommandFlags(t, "status")}
	n := 0
	for _, doc := range docFiles {
		text := strings.ReplaceAll(docText(t, doc), "\\\n", " ")
		for line := range strings.Lines(text) {
			for _, m := range chuteCommand.FindAllStringSubmatch(line, -1) {
				args := strings.Fields(strings.Trim(m[1], "`"))
				known := func(f string) bool { return fs.own[f] || fs.etcd[f] || f == "help" || f == "h" }
				if len(args) > 0 && sub[args[0]] != nil {
					flags := sub[args[0]]
					known = func(f string) bool { return flags[f] || f == "help" || f == "h" }
					args = args[1:]
				}
				for _, a := range args {
					a = strings.Trim(a, "`'\"(),.")
					if !strings.HasPrefix(a, "--") {
						continue
					}
					n++
					if f, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "="); !known(f) {
						t.Errorf("%s: `chute ...%s`: --%s is not a flag of chute", doc, m[1], f)
					}
				}
			}
		}
	}
	if n < 5 {
		t.Errorf("found only %d flags on chute command lines of the docs: the pattern no longer matches", n)
	}
}

// TestDocs_everyMetric: every instrument the code creates is in
// docs/operations.md under its Prometheus name (dots to underscores;
// internal/e2e checks the exact names a running node exports).
func TestDocs_everyMetric(t *testing.T) {
	var names []string
	re := regexp.MustCompile(`"((?:chute|rpc)\.[a-z_.]+)"`)
	for _, f := range []string{"dispatch/metrics.go", "gossip/metrics.go", "kv/metrics.go"} {
		for _, m := range re.FindAllStringSubmatch(docText(t, f), -1) {
			names = append(names, strings.ReplaceAll(m[1], ".", "_"))
		}
	}
	requireMentions(t, "docs/operations.md", "metric", names)
}

// TestDocs_everyKeyAndSetting: docs/queues.md names every key form of
// dispatch/key.go, every settings field and every ack mode.
func TestDocs_everyKeyAndSetting(t *testing.T) {
	key := docText(t, "dispatch/key.go")
	var forms []string
	for _, fn := range []string{"isProducer", "isConsumer"} {
		body := regexp.MustCompile(`func ` + fn + `\(s string\) bool \{([^}]*)\}`).FindStringSubmatch(key)
		if body == nil {
			t.Fatalf("dispatch/key.go: no func %s", fn)
		}
		for _, m := range regexp.MustCompile(`s == "([a-z]+)"`).FindAllStringSubmatch(body[1], -1) {
			forms = append(forms, "/q/{name}/"+m[1]+"/")
		}
	}
	forms = append(forms, "/q/{name}`", "/q/{name}/dlq/{seq}", "/q/{name}/{seq}/{key}", "/q/{name}/c/{id}/{seq}/{key}", "/config/queues/{name}", "/queue/")
	text := docText(t, "docs/queues.md")
	for _, f := range forms {
		if !strings.Contains(text, f) {
			t.Errorf("docs/queues.md does not document the key form %s", f)
		}
	}
	requireMentions(t, "docs/queues.md", "setting", jsonFields(t, "dispatch/settings.go", "settingsJSON"))
	var modes []string
	for _, m := range regexp.MustCompile(`Ack[A-Z][a-z]+ AckMode = "([a-z]+)"`).FindAllStringSubmatch(docText(t, "dispatch/settings.go"), -1) {
		modes = append(modes, m[1]+"`")
	}
	requireMentions(t, "docs/queues.md", "ack mode", modes)
	requireMentions(t, "docs/clickhouse.md", "ack mode", modes)
}

// TestDocs_statusAndEndpoints: every field of /status and /status/cluster
// and every path of the metrics listener is in docs/operations.md.
func TestDocs_statusAndEndpoints(t *testing.T) {
	var fields []string
	for file, types := range map[string][]string{
		"internal/nodestatus/nodestatus.go": {"Node", "Member", "Cluster", "ClusterMember", "ClusterQueue", "ClusterBackup"},
		"dispatch/queue.go":                 {"QueueStatus", "InsertError", "queueStats"},
		"dispatch/backup.go":                {"BackupStatus"},
	} {
		for _, typ := range types {
			for _, f := range jsonFields(t, file, typ) {
				fields = append(fields, f+"`")
			}
		}
	}
	requireMentions(t, "docs/operations.md", "/status field", fields)
	var paths []string
	for _, m := range regexp.MustCompile(`"GET (/[a-z/]+)"`).FindAllStringSubmatch(docText(t, "cmd/chute/node.go"), -1) {
		paths = append(paths, m[1]+"`")
	}
	requireMentions(t, "docs/operations.md", "endpoint", paths)
	requireMentions(t, "docs/operations.md", "exit code", []string{"0`", "1`", "2`"})
	text := docText(t, "docs/operations.md")
	for _, sig := range []string{"SIGTERM", "SIGINT", "SIGHUP"} {
		if !strings.Contains(text, sig) {
			t.Errorf("docs/operations.md does not say what %s does", sig)
		}
	}
}

// TestDocs_otelVariables: every OTEL_* variable chute reads is in
// docs/operations.md.
func TestDocs_otelVariables(t *testing.T) {
	vars, err := otelVars()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for v := range vars {
		names = append(names, v)
	}
	requireMentions(t, "docs/operations.md", "variable", names)
}

// jsonFields returns the JSON names of a struct type's fields, from its
// tags, by parsing the file.
func jsonFields(t testing.TB, rel, typeName string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), repoFile(rel), nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != typeName {
			return true
		}
		found = true
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			t.Fatalf("%s: %s is not a struct", rel, typeName)
		}
		for _, field := range st.Fields.List {
			if field.Tag == nil {
				continue
			}
			tag, _ := strconv.Unquote(field.Tag.Value)
			name, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
			if name != "" && name != "-" {
				out = append(out, name)
			}
		}
		return false
	})
	if !found {
		t.Fatalf("%s: no type %s", rel, typeName)
	}
	return out
}

// TestDocs_links: every relative link of the docs names a file or folder
// that exists.
func TestDocs_links(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, doc := range append(docFiles, "docs/examples/go/main.go") {
		for _, m := range link.FindAllStringSubmatch(docText(t, doc), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			p := filepath.Join(filepath.Dir(repoFile(doc)), filepath.FromSlash(target))
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s: link %s: %v", doc, m[1], err)
			}
		}
	}
}

// TestDocs_examples: the producer examples exist and use the documented
// key form (the Go one is built and run by internal/e2e).
func TestDocs_examples(t *testing.T) {
	for _, f := range []string{"docs/examples/producer.py", "docs/examples/producer.js", "docs/examples/go/main.go"} {
		text := docText(t, f)
		if !strings.Contains(text, "/q/") || !strings.Contains(text, "/p/") {
			t.Errorf("%s does not put to /q/{name}/p/{key}", f)
		}
	}
}
