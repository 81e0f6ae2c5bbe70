//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"chute/internal/chtest"
	"chute/internal/testutil"
)

// The docs' shell blocks run against a node: a new user copies
// them, so they must work as written.
//
// A fenced block runs when its info string is sh and it holds an etcdctl
// command, unless the last non-blank line before its fence is
// "<!-- not run: REASON -->" (blocks that need the compose stack, a
// cluster or a long wait). A block whose lines start with "$ " is a
// transcript: each command (continued by a trailing backslash) runs in
// bash on its own, and the lines after it, up to the next "$ ", are its
// output (stdout and stderr); "..." alone on a line stands for any lines,
// and inside a line for any text. A command still running once it printed
// what the doc shows (etcdctl watch) is stopped. Other blocks are scripts,
// run whole by bash -e, whose background jobs are stopped at its end. A
// fenced sql block runs on the doc's ClickHouse, statement by statement; a
// SELECT is polled until it returns a row.
//
// Each doc gets its own ClickHouse (internal/chtest) and chute node, with
// ETCDCTL_ENDPOINTS naming the node; 127.0.0.1:2379 (the etcd API),
// 127.0.0.1:9379 (metrics) and 127.0.0.1:8123 (ClickHouse) in a command
// are rewritten to the node's and the server's addresses. etcdctl 3.4
// logs a JSON warning line before each error; transcripts omit it.

// quietTimeout ends a transcript command that still runs, prints nothing
// more and has not printed what the doc shows.
const quietTimeout = 5 * time.Second

// docsRoot returns the module's directory (this package is internal/e2e).
func docsRoot(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(filepath.Dir(wd))
}

// runnableDocs are the docs whose blocks run, with the least number of
// runnable blocks each must hold (so a marker typo cannot skip them all).
var runnableDocs = map[string]int{
	"README.md":          1,
	"docs/queues.md":     4,
	"docs/clickhouse.md": 3,
	"docs/operations.md": 1,
	"deploy/README.md":   0,
}

// docBlock is a fenced block of a markdown file.
type docBlock struct {
	line   int    // of the opening fence
	lang   string // info string
	text   string
	notRun string // the reason of a <!-- not run: --> marker
}

var notRunMarker = regexp.MustCompile(`^<!-- not run: (.+) -->$`)

func parseDocBlocks(t testing.TB, text string) []docBlock {
	t.Helper()
	var blocks []docBlock
	var cur *docBlock
	var body strings.Builder
	lastText := ""
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		if cur != nil {
			if trimmed == "```" {
				cur.text = body.String()
				blocks = append(blocks, *cur)
				cur = nil
				lastText = ""
				continue
			}
			body.WriteString(line + "\n")
			continue
		}
		if lang, ok := strings.CutPrefix(trimmed, "```"); ok {
			cur = &docBlock{line: i + 1, lang: strings.TrimSpace(lang)}
			body.Reset()
			if m := notRunMarker.FindStringSubmatch(lastText); m != nil {
				cur.notRun = m[1]
			}
			continue
		}
		if trimmed != "" {
			lastText = trimmed
		}
	}
	if cur != nil {
		t.Fatalf("the block opened on line %d is not closed", cur.line)
	}
	return blocks
}

var etcdctlWord = regexp.MustCompile(`(^|[\s|;&(])etcdctl\s`)

func (b docBlock) runnable() bool {
	switch {
	case b.notRun != "":
		return false
	case b.lang == "sql":
		return true
	case b.lang == "sh":
		return etcdctlWord.MatchString(b.text)
	}
	return false
}

// docEnv is where a doc's blocks run.
type docEnv struct {
	t       *testing.T
	doc     string
	p       *Proc
	ch      *chtest.Server
	etcdctl string
	dir     string
}

func (e *docEnv) rewrite(cmd string) string {
	return strings.NewReplacer(
		"127.0.0.1:2379", e.p.ClientAddr, "localhost:2379", e.p.ClientAddr,
		"127.0.0.1:9379", e.p.MetricsAddr, "localhost:9379", e.p.MetricsAddr,
		"127.0.0.1:8123", e.ch.HTTPAddr(), "localhost:8123", e.ch.HTTPAddr(),
	).Replace(cmd)
}

func (e *docEnv) environ() []string {
	return append(etcdctlEnv(), "ETCDCTL_ENDPOINTS="+e.p.ClientAddr, "PATH="+filepath.Dir(e.etcdctl)+":"+os.Getenv("PATH"))
}

func TestDocs_blocksRun(t *testing.T) {
	t.Parallel()
	root := docsRoot(t)
	etcdctlPath := lookTool(t, "etcdctl")
	for doc, least := range runnableDocs {
		t.Run(doc, func(t *testing.T) {
			t.Parallel()
			text, err := os.ReadFile(filepath.Join(root, doc))
			if err != nil {
				t.Fatal(err)
			}
			blocks := parseDocBlocks(t, string(text))
			n := 0
			for _, b := range blocks {
				if b.runnable() {
					n++
				}
			}
			if n < least {
				t.Fatalf("%s: %d runnable blocks, want at least %d", doc, n, least)
			}
			if n == 0 {
				return
			}
			ch := chtest.Start(t)
			e := &docEnv{t: t, doc: doc, ch: ch, etcdctl: etcdctlPath, dir: t.TempDir()}
			e.p = StartChute(t, chFlags(ch)...)
			for _, b := range blocks {
				if !b.runnable() {
					continue
				}
				where := fmt.Sprintf("%s:%d", doc, b.line)
				switch {
				case b.lang == "sql":
					e.runSQL(where, b.text)
				case strings.Contains(b.text, "\n$ ") || strings.HasPrefix(b.text, "$ "):
					e.runTranscript(where, b.text)
				default:
					e.runScript(where, b.text)
				}
				if t.Failed() {
					return
				}
			}
		})
	}
}

// runSQL runs each statement of a sql block; a SELECT is polled until it
// returns a row.
func (e *docEnv) runSQL(where, text string) {
	var lines []string
	for line := range strings.Lines(text) {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			lines = append(lines, line)
		}
	}
	for stmt := range strings.SplitSeq(strings.Join(lines, ""), ";") {
		stmt = strings.TrimSpace(stmt)
		if stmt == "" {
			continue
		}
		if strings.HasPrefix(strings.ToUpper(stmt), "SELECT") {
			testutil.Eventually(e.t, rowsTimeout, where+": "+stmt+" to return a row", func() error {
				if got := e.ch.Query(e.t, stmt); got == "" {
					return errors.New("no row")
				}
				return nil
			})
			continue
		}
		e.ch.Exec(e.t, stmt)
	}
}

// transcriptStep is one command of a transcript and the output shown.
type transcriptStep struct {
	cmd  string
	want []string
}

func parseTranscript(text string) []transcriptStep {
	var steps []transcriptStep
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		cmd, ok := strings.CutPrefix(lines[i], "$ ")
		if !ok {
			if len(steps) > 0 {
				s := &steps[len(steps)-1]
				s.want = append(s.want, lines[i])
			}
			continue
		}
		for strings.HasSuffix(cmd, "\\") && i+1 < len(lines) {
			i++
			cmd = strings.TrimSuffix(cmd, "\\") + "\n" + lines[i]
		}
		steps = append(steps, transcriptStep{cmd: cmd})
	}
	return steps
}

// runTranscript runs each command and compares its output.
func (e *docEnv) runTranscript(where, text string) {
	for _, s := range parseTranscript(text) {
		got, err := e.run(s.cmd, func(out []string) bool { return len(s.want) > 0 && matchLines(s.want, out) })
		if err != nil {
			e.t.Fatalf("%s: $ %s: %v\noutput:\n%s", where, s.cmd, err, strings.Join(got, "\n"))
		}
		if !matchLines(s.want, got) {
			e.t.Fatalf("%s: $ %s\ngot:\n%s\nwant (as the doc shows):\n%s", where, s.cmd, strings.Join(got, "\n"), strings.Join(s.want, "\n"))
		}
	}
}

// runScript runs a block as one bash -e script and requires exit 0.
func (e *docEnv) runScript(where, text string) {
	got, err := e.run("set -e\n"+text, nil)
	if err != nil {
		e.t.Fatalf("%s: %v\noutput:\n%s", where, err, strings.Join(got, "\n"))
	}
}

// run runs cmd in bash in a process group of its own, its output in a file
// (so background jobs that keep it open do not block), and returns that
// output's lines. An exit status other than 0 is not an error for a
// transcript (etcdctl exits 1 on the errors the doc shows): enough is
// nil there. For a script (enough nil), it is. When enough reports the
// output complete while the command still runs, and the output stays the
// same for a moment, the command is stopped; one that runs on silent for
// quietTimeout without printing that fails.
func (e *docEnv) run(cmd string, enough func([]string) bool) ([]string, error) {
	outFile, err := os.CreateTemp(e.dir, "out")
	if err != nil {
		return nil, err
	}
	defer outFile.Close()
	c := exec.Command("bash", "-c", e.rewrite(cmd))
	c.Env = e.environ()
	c.Dir = e.dir
	c.Stdin = strings.NewReader("")
	c.Stdout, c.Stderr = outFile, outFile
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	kill := func() { _ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	defer kill() // background jobs of a script
	read := func() []string { return outputLines(outFile.Name()) }
	deadline := time.Now().Add(ctlTimeout)
	var settled, last []string
	lastChange := time.Now()
	for {
		select {
		case err := <-done:
			var exit *exec.ExitError
			if enough != nil && errors.As(err, &exit) {
				err = nil
			}
			return read(), err
		case <-time.After(pollInterval):
		}
		out := read()
		if enough != nil && enough(out) {
			if settled != nil && strings.Join(settled, "\n") == strings.Join(out, "\n") {
				kill()
				<-done
				return read(), nil
			}
			settled = out
			time.Sleep(300 * time.Millisecond)
			continue
		}
		settled = nil
		if strings.Join(out, "\n") != strings.Join(last, "\n") {
			last, lastChange = out, time.Now()
		}
		if enough != nil && time.Since(lastChange) > quietTimeout {
			kill()
			<-done
			return read(), fmt.Errorf("still running, and silent for %v without printing what the doc shows", quietTimeout)
		}
		if time.Now().After(deadline) {
			kill()
			<-done
			return read(), fmt.Errorf("still running after %v", ctlTimeout)
		}
	}
}

// outputLines reads a command's output: lines without trailing spaces,
// etcdctl's JSON warning lines dropped, trailing blank lines dropped.
func outputLines(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return []string{"<" + err.Error() + ">"}
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), " \t\r")
		if strings.HasPrefix(line, `{"level":"warn"`) {
			continue
		}
		lines = append(lines, line)
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// matchLines matches output against a doc's lines: "..." alone matches any
// lines, "..." inside a line any text.
func matchLines(want, got []string) bool {
	for len(want) > 0 && strings.TrimSpace(want[len(want)-1]) == "" {
		want = want[:len(want)-1]
	}
	if len(want) == 0 {
		return len(got) == 0
	}
	if strings.TrimSpace(want[0]) == "..." {
		for i := 0; i <= len(got); i++ {
			if matchLines(want[1:], got[i:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && matchLine(strings.TrimRight(want[0], " \t"), got[0]) && matchLines(want[1:], got[1:])
}

func matchLine(want, got string) bool {
	parts := strings.Split(want, "...")
	var re strings.Builder
	re.WriteString("^")
	for i, p := range parts {
		if i > 0 {
			re.WriteString(".*")
		}
		re.WriteString(regexp.QuoteMeta(p))
	}
	re.WriteString("$")
	return regexp.MustCompile(re.String()).MatchString(got)
}

func TestDocs_matchLines(t *testing.T) {
	for _, tc := range []struct {
		want, got string
		ok        bool
	}{
		{"OK", "OK", true},
		{"OK", "OK\nOK", false},
		{"a\n...\nz", "a\nb\nc\nz", true},
		{"a\n...\nz", "a\nz", true},
		{"Error: ... dead letter /q/x/dlq/...", "Error: rpc error: dead letter /q/x/dlq/3", true},
		{"Error: ... dead letter /q/x/dlq/...", "Error: rpc error: dead letter /q/y/dlq/3", false},
		{"", "", true},
	} {
		var want, got []string
		if tc.want != "" {
			want = strings.Split(tc.want, "\n")
		}
		if tc.got != "" {
			got = strings.Split(tc.got, "\n")
		}
		if ok := matchLines(want, got); ok != tc.ok {
			t.Errorf("matchLines(%q, %q) = %v, want %v", tc.want, tc.got, ok, tc.ok)
		}
	}
}

// TestDocs_metricsDocumented: every chute_* and rpc_* family a node
// exports, once it has inserted, retried and delivered, is named in
// docs/operations.md, and so are the go_*, process_* and target_info
// groups.
func TestDocs_metricsDocumented(t *testing.T) {
	t.Parallel()
	ops, err := os.ReadFile(filepath.Join(docsRoot(t), "docs/operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default.docs_metrics (id UInt64) ENGINE = MergeTree ORDER BY id")
	p := StartChute(t, chFlags(ch)...)
	cli := clusterClient(t, p.ClientAddr)
	ctx, cancel := rpcCtx()
	defer cancel()
	for _, kv := range [][2]string{
		{"/q/ch:docs_metrics/p/1", `{"id":1}`},   // a batch inserted
		{"/q/ch:docs_metrics/p/2", `{"id":"x"}`}, // a dead letter
		{"/q/ch:no_such_table/p/1", `{"id":1}`},  // config errors, retried
		{"/q/jobs/p/1", "job"},                   // an ordinary queue
	} {
		if _, err := cli.Put(ctx, kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	families := func() (map[string]bool, error) {
		resp, err := http.Get("http://" + p.MetricsAddr + "/metrics")
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, err
		}
		out := map[string]bool{}
		for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+) `).FindAllStringSubmatch(string(body), -1) {
			out[m[1]] = true
		}
		return out, nil
	}
	var fams map[string]bool
	testutil.Eventually(t, rowsTimeout, "the insert, dead letter and retry metrics", func() error {
		var err error
		if fams, err = families(); err != nil {
			return err
		}
		for _, want := range []string{"chute_clickhouse_insert_duration_seconds", "chute_clickhouse_retries_total", "chute_clickhouse_batches_total"} {
			if !fams[want] {
				return fmt.Errorf("no %s yet", want)
			}
		}
		return nil
	})
	documented := func(name string) bool {
		return regexp.MustCompile("`" + regexp.QuoteMeta(name) + "[`{]").Match(ops)
	}
	for f := range fams {
		switch {
		case strings.HasPrefix(f, "chute_") || strings.HasPrefix(f, "rpc_"):
			if !documented(f) {
				t.Errorf("docs/operations.md does not document the metric %s", f)
			}
		case strings.HasPrefix(f, "go_"), strings.HasPrefix(f, "process_"), f == "target_info":
		default:
			t.Errorf("/metrics exports %s, of no group docs/operations.md describes", f)
		}
	}
	for _, group := range []string{"`go_*`", "`process_*`", "`target_info`"} {
		if !strings.Contains(string(ops), group) {
			t.Errorf("docs/operations.md does not mention %s", group)
		}
	}
}

// TestDocs_goProducer builds and runs the Go producer example against a
// node: its rows land in ClickHouse.
func TestDocs_goProducer(t *testing.T) {
	t.Parallel()
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default.events (id UInt64, msg String) ENGINE = MergeTree ORDER BY id")
	p := StartChute(t, chFlags(ch)...)
	bin, err := testutil.Build(t.TempDir(), "chute/docs/examples/go")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ctlTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "-endpoints", p.ClientAddr, "-rows", "10").CombinedOutput()
	if err != nil {
		t.Fatalf("producer: %v\n%s", err, out)
	}
	waitQuery(t, ch, rowsTimeout, "SELECT count() FROM default.events", "11")
	t.Logf("producer:\n%s", out)
}
