//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Bounds of etcdctl runs.
const (
	ctlTimeout   = 30 * time.Second // one foreground etcdctl command
	watchTimeout = 10 * time.Second // a background watch printing what a test waits for
)

// ctlResult is what one etcdctl run printed and its exit code.
type ctlResult struct {
	Stdout string
	Stderr string
	Code   int
}

// etcdctlEnv is the environment of every etcdctl run: this process's, less
// any ETCDCTL_* variable, with ETCDCTL_API=3.
func etcdctlEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ETCDCTL_") {
			env = append(env, kv)
		}
	}
	return append(env, "ETCDCTL_API=3")
}

// etcdctlCmd returns an etcdctl command for the endpoint addr.
func etcdctlCmd(ctx context.Context, path, addr string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, path, append([]string{"--endpoints", addr}, args...)...)
	cmd.Env = etcdctlEnv()
	return cmd
}

// runEtcdctl runs etcdctl against addr with stdin and returns its output and
// exit code. A run that cannot start or outlives ctlTimeout is an error.
func runEtcdctl(path, addr, stdin string, args ...string) (ctlResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ctlTimeout)
	defer cancel()
	cmd := etcdctlCmd(ctx, path, addr, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := ctlResult{Stdout: stdout.String(), Stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return res, fmt.Errorf("etcdctl %s: no exit within %v", strings.Join(args, " "), ctlTimeout)
	case errors.As(err, &exit):
		res.Code = exit.ExitCode()
	case err != nil:
		return res, fmt.Errorf("etcdctl %s: %w", strings.Join(args, " "), err)
	}
	return res, nil
}

// session runs etcdctl commands against one server and keeps a transcript
// of them: each command, its stdin, stdout, stderr and exit code. The
// transcript is normalised (normalise) so that a session against etcd and
// the same session against chute can be compared byte for byte.
//
// A session never stops its test: a command that fails to run is recorded
// in the transcript and reported with t.Errorf, so that two sessions may
// run on two goroutines at once.
type session struct {
	t       testing.TB
	p       *Proc
	etcdctl string

	mu      sync.Mutex
	buf     strings.Builder
	subs    []substitution    // per-server values to placeholders, in order
	leases  int               // leases named so far: <lease1>, <lease2>, ...
	granted map[int]time.Time // TTL of 10 s or more: when its first lease grant began
}

type substitution struct {
	re   *regexp.Regexp
	repl string
}

// newSession returns a session against p. It learns p's member and cluster
// ids (with an unrecorded endpoint status) to replace them by placeholders.
func newSession(t testing.TB, p *Proc) *session {
	s := &session{t: t, p: p, etcdctl: lookTool(t, "etcdctl")}
	s.alias(p.ClientAddr, "<client-addr>")
	s.alias(p.PeerAddr, "<peer-addr>")
	res, err := runEtcdctl(s.etcdctl, p.ClientAddr, "", "endpoint", "status", "-w", "json")
	if err != nil || res.Code != 0 {
		s.fail("learn ids: endpoint status: %v %+v", err, res)
		return s
	}
	var st []struct {
		Status struct {
			Header struct {
				ClusterID uint64 `json:"cluster_id"`
				MemberID  uint64 `json:"member_id"`
			} `json:"header"`
		}
	}
	if err := json.Unmarshal([]byte(res.Stdout), &st); err != nil || len(st) != 1 {
		s.fail("learn ids: endpoint status -w json: %v: %q", err, res.Stdout)
		return s
	}
	s.aliasID(st[0].Status.Header.MemberID, "<member-id>")
	s.aliasID(st[0].Status.Header.ClusterID, "<cluster-id>")
	return s
}

// fail records a harness error in the transcript and fails the test.
func (s *session) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.t.Errorf("%s: %s", s.p, msg)
	s.mu.Lock()
	fmt.Fprintf(&s.buf, "<harness error: %s>\n", msg)
	s.mu.Unlock()
}

// alias replaces value, where it stands as a whole word, by placeholder.
func (s *session) alias(value, placeholder string) {
	s.aliasRE(`\b`+regexp.QuoteMeta(value)+`\b`, placeholder)
}

// aliasRE replaces what matches the regular expression re by placeholder.
func (s *session) aliasRE(re, placeholder string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs = append(s.subs, substitution{regexp.MustCompile(re), placeholder})
}

// aliasID replaces a 64-bit id printed in decimal, %x or %016x.
func (s *session) aliasID(id uint64, placeholder string) {
	s.alias(fmt.Sprintf("%016x", id), placeholder)
	s.alias(fmt.Sprintf("%x", id), placeholder)
	s.alias(strconv.FormatUint(id, 10), placeholder)
}

// aliasLease names a lease: <leaseN>, N counting the session's leases.
// Lease ids may be small numbers, so the decimal form is replaced only as
// the value of a JSON id or lease field; etcdctl prints the hex form %016x.
func (s *session) aliasLease(id uint64) {
	s.mu.Lock()
	s.leases++
	name := fmt.Sprintf("<lease%d>", s.leases)
	s.subs = append(s.subs,
		substitution{regexp.MustCompile(`\b` + fmt.Sprintf("%016x", id) + `\b`), name},
		substitution{regexp.MustCompile(`"(ID|id|lease)":` + strconv.FormatUint(id, 10) + `\b`), `"$1":"` + name + `"`})
	s.mu.Unlock()
}

// ctl runs etcdctl with args and records it.
func (s *session) ctl(args ...string) ctlResult { return s.ctlIn("", args...) }

// ctlIn runs etcdctl with args and stdin and records it.
func (s *session) ctlIn(stdin string, args ...string) ctlResult {
	res, err := runEtcdctl(s.etcdctl, s.p.ClientAddr, stdin, args...)
	if err != nil {
		s.fail("%v", err)
	}
	s.record(args, stdin, res)
	return res
}

// note records a line of the test's own in the transcript.
func (s *session) note(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(&s.buf, "# "+format+"\n", args...)
}

// record appends one command to the transcript: "$ etcdctl args", its stdin
// as "< " lines (a long one shortened), stdout, stderr as "! " lines and a
// non-zero exit code.
func (s *session) record(args []string, stdin string, res ctlResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := &s.buf
	b.WriteString("$ etcdctl")
	for _, a := range args {
		b.WriteString(" " + shellWord(a))
	}
	b.WriteString("\n")
	lines := strings.Split(strings.TrimSuffix(stdin, "\n"), "\n")
	switch {
	case stdin == "":
	case len(lines) == 1 && len(stdin) > 1000:
		fmt.Fprintf(b, "< <%d bytes>\n", len(stdin))
	case len(lines) > 20:
		for _, l := range lines[:3] {
			b.WriteString("< " + shellWord(l) + "\n")
		}
		fmt.Fprintf(b, "< ... <%d lines>\n", len(lines))
	default:
		for _, l := range lines {
			b.WriteString("< " + l + "\n")
		}
	}
	b.WriteString(s.sinceGrant(res.Stdout))
	if res.Stdout != "" && !strings.HasSuffix(res.Stdout, "\n") {
		b.WriteString("<no newline>\n")
	}
	if res.Stderr != "" {
		for _, l := range strings.Split(strings.TrimSuffix(res.Stderr, "\n"), "\n") {
			b.WriteString("! " + l + "\n")
		}
	}
	if res.Code != 0 {
		fmt.Fprintf(b, "[exit %d]\n", res.Code)
	}
}

// shellWord quotes a for the transcript, and shortens a long one.
func shellWord(a string) string {
	if len(a) > 64 {
		return fmt.Sprintf("%s...<%d bytes>", shellWord(a[:16]), len(a))
	}
	if a != "" && !strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}()<>|&;#~!") {
		return a
	}
	return "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
}

// Transcript returns the normalised transcript.
func (s *session) transcript() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.buf.String()
	for _, sub := range s.subs {
		out = sub.re.ReplaceAllString(out, sub.repl)
	}
	return normalise(out)
}

// What differs legitimately between etcd and chute, and its replacement.
var normalisations = []substitution{
	// etcdctl's client log lines: the time and the client's random id.
	{regexp.MustCompile(`"ts":("[^"]*"|[0-9.]+)`), `"ts":"<ts>"`},
	{regexp.MustCompile(`client-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`), `client-<uuid>`},
	// Timings.
	{regexp.MustCompile(`took = [0-9.]+[a-zµ]*s\b`), `took = <took>`},
	{regexp.MustCompile(`"took":"[^"]*"`), `"took":"<took>"`},
	// raft: chute's term is a counter of its own, it has no raft log, its
	// version and db size are its own.
	{regexp.MustCompile(`"raft_term":\d+`), `"raft_term":<term>`},
	{regexp.MustCompile(`"raftTerm":\d+`), `"raftTerm":<term>`},
	{regexp.MustCompile(`(?m)^"(RaftTerm|RaftIndex|RaftAppliedIndex)" : \d+$`), `"$1" : <raft>`},
	{regexp.MustCompile(`(?m)^"DBSize" : \d+$`), `"DBSize" : <size>`},
	{regexp.MustCompile(`(?m)^"Version" : "[^"]*"$`), `"Version" : "<version>"`},
	{regexp.MustCompile(`\|[0-9.]+[a-zµ]*s\|`), `|<took>|`},
	{regexp.MustCompile(`(?m)^(<client-addr>), \d+$`), `$1, <hash>`},
	{regexp.MustCompile(`"raftIndex":\d+`), `"raftIndex":<index>`},
	{regexp.MustCompile(`"raftAppliedIndex":\d+`), `"raftAppliedIndex":<index>`},
	{regexp.MustCompile(`"version":"[^"]*"`), `"version":"<version>"`},
	{regexp.MustCompile(`"dbSize":\d+`), `"dbSize":<size>`},
	{regexp.MustCompile(`"dbSizeInUse":\d+`), `"dbSizeInUse":<size>`},
	{regexp.MustCompile(`"hash":\d+`), `"hash":<hash>`},
	// endpoint status, simple and (after canonicalTables) table rows.
	{regexp.MustCompile(`(?m)^((?:http://)?<client-addr>, <member-id>), [^,]*, [^,]*, (true|false), (true|false), \d+, \d+, \d+, `),
		`$1, <version>, <size>, $2, $3, <term>, <index>, <index>, `},
	{regexp.MustCompile(`(?m)^\|(<client-addr>\|<member-id>)\|[^|]*\|[^|]*\|(true|false)\|(true|false)\|\d+\|\d+\|\d+\|`),
		`|$1|<version>|<size>|$2|$3|<term>|<index>|<index>|`},
}

// etcd lists the keys of a lease (lease timetolive --keys) in the order of
// a Go map: sortedLists sorts them.
var (
	jsonKeysRE     = regexp.MustCompile(`"keys":\[([^\]]*)\]`)
	attachedKeysRE = regexp.MustCompile(`attached keys\(\[([^\]]*)\]\)`)
)

// sortedLists sorts the lists that etcd prints in no particular order.
func sortedLists(s string) string {
	sortList := func(re *regexp.Regexp, sep string) {
		s = re.ReplaceAllStringFunc(s, func(m string) string {
			sub := re.FindStringSubmatchIndex(m)
			items := strings.Split(m[sub[2]:sub[3]], sep)
			slices.Sort(items)
			return m[:sub[2]] + strings.Join(items, sep) + m[sub[3]:]
		})
	}
	sortList(jsonKeysRE, ",")
	sortList(attachedKeysRE, " ")
	return s
}

// normalise applies normalisations to a transcript whose per-server values
// are already replaced, after canonicalTables and sortedLists.
func normalise(s string) string {
	s = sortedLists(canonicalTables(s))
	for _, n := range normalisations {
		s = n.re.ReplaceAllString(s, n.repl)
	}
	return s
}

// canonicalTables removes the padding of etcdctl's tables, which depends on
// the width of ids and versions: "| a  | b |" becomes "|a|b|" and a rule
// "+----+---+" becomes "+".
func canonicalTables(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "+-") && strings.Trim(l, "+-") == "":
			lines[i] = "+"
		case strings.HasPrefix(l, "|") && strings.HasSuffix(l, "|"):
			cells := strings.Split(l[1:len(l)-1], "|")
			for j, c := range cells {
				cells[j] = strings.TrimSpace(c)
			}
			lines[i] = "|" + strings.Join(cells, "|") + "|"
		}
	}
	return strings.Join(lines, "\n")
}

// pair is a real etcd and a chute node named "default" (as etcd's member
// is), each with a session whose placeholders forks share.
type pair struct {
	etcd, chute *Proc
	want, got   *session // against etcd, against chute
}

// startPair starts etcd and chute for the test; with E2E_ETCDCTL_AUTH
// set, with auth enabled (startAuthPair).
func startPair(t *testing.T) *pair {
	t.Helper()
	if os.Getenv(authParityEnv) != "" {
		return startAuthPair(t)
	}
	etcd := StartEtcd(t) // first: a missing etcd fails before chute starts
	chute := StartChute(t, "--name", "default")
	return &pair{etcd: etcd, chute: chute, want: newSession(t, etcd), got: newSession(t, chute)}
}

// run runs script against etcd and chute, each on its own goroutine, with
// sessions whose transcripts start empty, and fails t where the normalised
// transcripts, passed through norms, differ.
func (pr *pair) run(t *testing.T, script func(s *session), norms ...func(string) string) {
	t.Helper()
	want, got := pr.want.fork(t), pr.got.fork(t)
	var wg sync.WaitGroup
	for _, s := range []*session{want, got} {
		wg.Go(func() { script(s) })
	}
	wg.Wait()
	w, g := want.transcript(), got.transcript()
	for _, n := range norms {
		w, g = n(w), n(g)
	}
	requireSameTranscript(t, w, g)
}

// compareWithEtcd runs script against a new etcd and a new chute and fails
// the test where the normalised transcripts, passed through norms, differ.
func compareWithEtcd(t *testing.T, script func(s *session), norms ...func(string) string) {
	t.Helper()
	startPair(t).run(t, script, norms...)
}

// fork returns a session against the same server for test t, with an empty
// transcript and the placeholders of s so far. Leases named in the fork
// are not named in s.
func (s *session) fork(t testing.TB) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &session{t: t, p: s.p, etcdctl: s.etcdctl, subs: append([]substitution(nil), s.subs...), leases: s.leases, granted: maps.Clone(s.granted)}
}

// requireSameTranscript fails the test with a line diff when got differs
// from want. With E2E_TRANSCRIPTS set in the environment it logs want.
func requireSameTranscript(t *testing.T, want, got string) {
	t.Helper()
	if os.Getenv("E2E_TRANSCRIPTS") != "" {
		t.Logf("etcd's transcript:\n%s", want)
	}
	if want == got {
		return
	}
	t.Errorf("chute's etcdctl transcript differs from etcd's (-etcd +chute):\n%s", lineDiff(want, got))
}

// lineDiff returns a and b as one listing, lines only in a marked "-",
// lines only in b marked "+", common lines indented.
func lineDiff(a, b string) string {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	// lcs[i][j] is the length of the longest common subsequence of x[i:], y[j:].
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			out.WriteString("  " + x[i] + "\n")
			i++
			j++
		case j < len(y) && (i == len(x) || lcs[i][j+1] >= lcs[i+1][j]):
			out.WriteString("+ " + y[j] + "\n")
			j++
		default:
			out.WriteString("- " + x[i] + "\n")
			i++
		}
	}
	return out.String()
}

// etcdctl's answers to lease grant, simple and -w json.
var (
	leaseGrantRE     = regexp.MustCompile(`^lease ([0-9a-f]+) granted with TTL\(\d+s\)`)
	leaseGrantJSONRE = regexp.MustCompile(`"ID":(\d+)`)
)

// grant runs lease grant ttl (and args, such as -w json), names the lease
// and returns its id in hex ("0" if the server granted none, which the
// transcript shows).
func (s *session) grant(ttl int, args ...string) string {
	start := time.Now()
	res := s.ctl(append([]string{"lease", "grant", strconv.Itoa(ttl)}, args...)...)
	var id uint64
	var err error
	if m := leaseGrantRE.FindStringSubmatch(res.Stdout); m != nil {
		id, err = strconv.ParseUint(m[1], 16, 64)
	} else if m := leaseGrantJSONRE.FindStringSubmatch(res.Stdout); m != nil {
		id, err = strconv.ParseUint(m[1], 10, 64)
	} else {
		return "0"
	}
	if err != nil {
		s.fail("lease grant: %v", err)
		return "0"
	}
	s.aliasLease(id)
	if ttl >= 10 {
		s.mu.Lock()
		if _, ok := s.granted[ttl]; !ok {
			if s.granted == nil {
				s.granted = make(map[int]time.Time)
			}
			s.granted[ttl] = start
		}
		s.mu.Unlock()
	}
	return fmt.Sprintf("%016x", id)
}

// A lease's remaining TTL as etcdctl lease timetolive prints it, simple
// and -w json.
var (
	remainingRE     = regexp.MustCompile(`granted with TTL\((\d+)s\), remaining\((-?\d+)s\)`)
	remainingJSONRE = regexp.MustCompile(`"ttl":(-?\d+),"granted-ttl":(\d+)`)
)

// sinceGrant replaces in out the remaining TTL of a lease of 10 s or more
// by "<since grant>" where it fits the wall-clock time since the session
// began granting leases of that TTL: no more than the TTL and no less than
// the TTL less those seconds and one. The remaining TTL counts wall-clock
// seconds, which a loaded machine stretches between the steps of a
// transcript, but a value outside that window stays in the transcript.
// s.mu is held.
func (s *session) sinceGrant(out string) string {
	if len(s.granted) == 0 {
		return out
	}
	fits := func(ttl, left string) bool {
		t, err1 := strconv.Atoi(ttl)
		l, err2 := strconv.Atoi(left)
		start, ok := s.granted[t]
		if err1 != nil || err2 != nil || !ok {
			return false
		}
		elapsed := int(math.Ceil(time.Since(start).Seconds()))
		return l <= t && l >= t-elapsed-1
	}
	out = remainingRE.ReplaceAllStringFunc(out, func(m string) string {
		g := remainingRE.FindStringSubmatch(m)
		if !fits(g[1], g[2]) {
			return m
		}
		return "granted with TTL(" + g[1] + "s), remaining(<since grant>s)"
	})
	return remainingJSONRE.ReplaceAllStringFunc(out, func(m string) string {
		g := remainingJSONRE.FindStringSubmatch(m)
		if !fits(g[2], g[1]) {
			return m
		}
		return `"ttl":<since grant>,"granted-ttl":` + g[2]
	})
}

// bgCtl is an etcdctl command running in the background, such as a watch.
type bgCtl struct {
	args   []string
	cmd    *exec.Cmd
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	stdout bytes.Buffer
	stderr bytes.Buffer
}

// syncWriter appends to a buffer under bgCtl's lock.
type syncWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// start runs etcdctl with args in the background. Its output is recorded
// when stop ends it.
func (s *session) start(args ...string) *bgCtl {
	ctx, cancel := context.WithCancel(context.Background())
	b := &bgCtl{args: args, cancel: cancel, done: make(chan struct{})}
	b.cmd = etcdctlCmd(ctx, s.etcdctl, s.p.ClientAddr, args...)
	b.cmd.Stdout = syncWriter{&b.mu, &b.stdout}
	b.cmd.Stderr = syncWriter{&b.mu, &b.stderr}
	if err := b.cmd.Start(); err != nil {
		s.fail("start etcdctl %s: %v", strings.Join(args, " "), err)
		close(b.done)
		return b
	}
	go func() {
		_ = b.cmd.Wait() // the exit code is the kill's
		close(b.done)
	}()
	s.t.Cleanup(func() { b.cancel(); <-b.done })
	return b
}

// output returns what the command has printed so far.
func (b *bgCtl) output() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stdout.String()
}

// waitLines polls until the command has printed at least n lines, it has
// exited or watchTimeout passes, and reports whether it saw n lines.
func (b *bgCtl) waitLines(n int) bool {
	return b.waitFor(func(out string) bool { return strings.Count(out, "\n") >= n })
}

// waitFor polls until cond holds for the output so far, the command has
// exited or watchTimeout passes, and reports whether cond held.
func (b *bgCtl) waitFor(cond func(out string) bool) bool {
	return b.waitForWithin(watchTimeout, cond)
}

// waitForWithin is waitFor with a timeout of its own.
func (b *bgCtl) waitForWithin(timeout time.Duration, cond func(out string) bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond(b.output()) {
			return true
		}
		select {
		case <-b.done:
			return cond(b.output())
		default:
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollInterval)
	}
}

// stop kills the command and records its output. A command that had
// exited by itself shows its exit code.
func (s *session) stop(b *bgCtl) {
	exited := false
	select {
	case <-b.done:
		exited = true
	default:
	}
	b.cancel()
	<-b.done
	b.mu.Lock()
	res := ctlResult{Stdout: b.stdout.String(), Stderr: b.stderr.String()}
	b.mu.Unlock()
	if exited && b.cmd.ProcessState != nil {
		res.Code = b.cmd.ProcessState.ExitCode()
	}
	s.record(append([]string{"(background)"}, b.args...), "", res)
}

// endWatch waits until b has printed n lines, then stops it and records
// its output; a watch that printed fewer lines within watchTimeout is
// recorded with what it printed, and a note.
func (s *session) endWatch(b *bgCtl, n int) {
	if !b.waitLines(n) {
		s.note("the watch printed fewer than %d lines within %v", n, watchTimeout)
	}
	s.stop(b)
}

// startSynced starts a watch (args) whose start revision replays history,
// and waits until it has printed that replay, lines lines: from then on
// the server sends each new revision in a response of its own, so the
// grouping of events in -w json output does not depend on timing.
func (s *session) startSynced(lines int, args ...string) *bgCtl {
	b := s.start(args...)
	if !b.waitLines(lines) {
		s.note("the watch did not replay %d lines within %v", lines, watchTimeout)
	}
	return b
}

// endExited waits up to watchTimeout for b to exit by itself, then stops it
// and records its output and exit code.
func (s *session) endExited(b *bgCtl) {
	select {
	case <-b.done:
	case <-time.After(watchTimeout):
		s.note("etcdctl %s did not exit within %v", strings.Join(b.args, " "), watchTimeout)
	}
	s.stop(b)
}
