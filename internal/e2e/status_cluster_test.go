//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"chute/internal/testutil"
)

// `chute status` (cmd/chute/status.go) asks one node for the whole
// cluster and prints a title line, a blank line, the members table, a
// blank line, the queues table and a blank line; then notes (members that
// did not answer, insert errors) and copies, when there are any. Tables
// are text/tabwriter columns: every cell of a column starts where its
// header does.

// Columns of the two tables of `chute status`.
var (
	statusMemberCols = []string{"MEMBER", "ID", "STATUS", "ANSWERED", "VERSION", "PEER URLS", "CLIENT URLS"}
	statusQueueCols  = []string{"QUEUE", "DISPATCHER", "EPOCH", "ROWS", "HELD", "BYTES", "UNACKED", "CONSUMERS", "ACK", "BACKUP"}
)

// statusBlock is what `chute status` prints.
type statusBlock struct {
	Title   string
	Members [][]string // rows of cells, in printed order
	Queues  [][]string
	Rest    []string // the lines after the queues table
}

// statusRun is one run of `chute status`.
type statusRun struct {
	Stdout, Stderr string
	Code           int
}

// runStatus runs the chute binary's `chute status --endpoints` on the
// metrics listeners of nodes, then extra flags.
func runStatus(nodes []*Proc, extra ...string) (statusRun, error) {
	eps := make([]string, len(nodes))
	for i, p := range nodes {
		eps[i] = p.MetricsAddr
	}
	ctx, cancel := context.WithTimeout(context.Background(), ctlTimeout)
	defer cancel()
	args := append([]string{"status", "--endpoints", strings.Join(eps, ","), "--timeout", "5s"}, extra...)
	cmd := exec.CommandContext(ctx, chuteBin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := statusRun{Stdout: stdout.String(), Stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return res, fmt.Errorf("chute status: no exit within %v", ctlTimeout)
	case errors.As(err, &exit):
		res.Code = exit.ExitCode()
	case err != nil:
		return res, fmt.Errorf("chute status: %w", err)
	}
	return res, nil
}

// parseStatusOutput reads the stdout of `chute status`, requiring the
// layout exactly: title, blank, members table, blank, queues table,
// blank, then the rest.
func parseStatusOutput(out string) (statusBlock, error) {
	var b statusBlock
	if !strings.HasSuffix(out, "\n") {
		return b, fmt.Errorf("output does not end with a newline: %q", out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	i := 0
	// table reads a header and its rows up to a blank line, which it
	// consumes.
	table := func(cols []string) ([][]string, error) {
		end := slices.Index(lines[i:], "")
		if end < 1 {
			return nil, fmt.Errorf("line %d: want a %s table ended by a blank line", i+1, cols[0])
		}
		rows, err := parseTable(cols, lines[i:i+end])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		i += end + 1
		return rows, nil
	}
	b.Title = lines[0]
	if !strings.HasPrefix(b.Title, "cluster seen by node ") {
		return b, fmt.Errorf("line 1: %q, want a title \"cluster seen by node ...\"", b.Title)
	}
	if len(lines) < 2 || lines[1] != "" {
		return b, fmt.Errorf("line 2: want a blank line after the title")
	}
	i = 2
	var err error
	if b.Members, err = table(statusMemberCols); err != nil {
		return b, err
	}
	if b.Queues, err = table(statusQueueCols); err != nil {
		return b, err
	}
	b.Rest = lines[i:]
	return b, nil
}

// parseTable checks that lines[0] is the header of cols, aligned as
// tabwriter aligns it, and cuts every further line into one cell per
// column at the header's offsets.
func parseTable(cols []string, lines []string) ([][]string, error) {
	header := lines[0]
	offs := make([]int, len(cols))
	pos := 0
	for j, c := range cols {
		k := strings.Index(header[pos:], c)
		if k < 0 || strings.TrimSpace(header[pos:pos+k]) != "" || (j == 0) != (k == 0) {
			return nil, fmt.Errorf("header %q: want the columns %q", header, cols)
		}
		offs[j] = pos + k
		pos = offs[j] + len(c)
	}
	if pos != len(header) {
		return nil, fmt.Errorf("header %q: text after the last column %s", header, cols[len(cols)-1])
	}
	var rows [][]string
	for _, line := range lines[1:] {
		row := make([]string, len(cols))
		for j, off := range offs {
			end := len(line)
			if j+1 < len(offs) {
				end = offs[j+1]
			}
			if off >= len(line) || end > len(line) || line[off] == ' ' || (j > 0 && line[off-1] != ' ') {
				return nil, fmt.Errorf("row %q: column %s is not aligned with its header %q", line, cols[j], header)
			}
			row[j] = strings.TrimRight(line[off:end], " ")
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// chuteVersion is what `chute --version` prints after "chute ".
func chuteVersion(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(chuteBin, "--version").Output()
	v, ok := strings.CutPrefix(strings.TrimSpace(string(out)), "chute ")
	if err != nil || !ok || v == "" {
		t.Fatalf("chute --version: %q, %v; want \"chute <version>\"", out, err)
	}
	return v
}

// putAll puts each value at its key through cli, in order.
func putAll(t *testing.T, cli *clientv3.Client, p *Proc, kvs [][2]string) {
	t.Helper()
	for _, kv := range kvs {
		ctx, cancel := rpcCtx()
		_, err := cli.Put(ctx, kv[0], kv[1])
		cancel()
		if err != nil {
			t.Fatalf("put %s on %s: %v", kv[0], p.Name, err)
		}
	}
}

// queuePuts returns n puts to queue's producer keys, tails made of on
// and a number, and the bytes they add to depth_bytes: each message's
// value and the last segment of its key.
func queuePuts(queue string, on []string, value func(i int, tail string) string) ([][2]string, int) {
	var kvs [][2]string
	size := 0
	for i, o := range on {
		tail := fmt.Sprintf("%s-%05d", o, i)
		v := value(i, tail)
		kvs = append(kvs, [2]string{"/q/" + queue + "/p/" + tail, v})
		size += len(tail) + len(v)
	}
	return kvs, size
}

// statusJSON is the part of `chute status --json` the test reads.
type statusJSON struct {
	Name    string `json:"name"`
	Members []struct {
		Name     string `json:"name"`
		ID       string `json:"id"`
		Status   string `json:"status"`
		Answered bool   `json:"answered"`
	} `json:"members"`
	Queues []struct {
		Name               string `json:"name"`
		Dispatcher         string `json:"dispatcher"`
		DispatcherName     string `json:"dispatcher_name"`
		DispatcherAnswered bool   `json:"dispatcher_answered"`
		Epoch              uint64 `json:"epoch"`
		Rows               int    `json:"depth_rows"`
		Bytes              int64  `json:"depth_bytes"`
	} `json:"queues"`
}

// TestStatus_threeNodes runs `chute status` against one node of a
// three-node cluster holding three queues, each dispatched by another
// node: "orders" (produced on a, which dispatches it, and on c, which
// forwards), "ch:events" (a ClickHouse queue produced on b, whose rows
// stay queued, held by its drainer, as no --clickhouse-url is set) and
// "jobs" (produced on c and on a). The one node gathers the others'
// queues over the peer link: the output lists a, b and c alive, answered,
// with their 16-digit ids and URLs, and every queue with its dispatcher,
// epoch and depth in rows and bytes, whichever node is asked; --json
// says the same to machines, and --watch --count prints again. After c
// is killed (SIGKILL), asking a still exits 0: c is marked (failed, or
// alive and not answering), and jobs, whose dispatcher is gone, shows
// its depth unknown.
func TestStatus_threeNodes(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a, b, cc := c.startThree()
	all := []*Proc{a, b, cc}
	version := chuteVersion(t)
	ids := make(map[*Proc]string)
	for _, p := range all {
		ids[p] = fmt.Sprintf("%016x", memberID(t, p))
	}

	orders, ordersBytes := queuePuts("orders", []string{"a", "a", "a", "c", "c"}, func(_ int, tail string) string { return "order " + tail })
	events, eventsBytes := queuePuts("ch:events", []string{"b", "b", "b", "b"}, func(i int, _ string) string { return fmt.Sprintf(`{"id":%d,"s":"row %d"}`, i, i) })
	jobs, jobsBytes := queuePuts("jobs", []string{"c", "c", "c", "a", "a", "a"}, func(_ int, tail string) string { return "job " + tail })
	clis := clientsOf(t, all...)
	putAll(t, clis[0], a, orders[:3]) // a claims orders
	putAll(t, clis[2], cc, orders[3:])
	putAll(t, clis[1], b, events)    // b claims ch:events
	putAll(t, clis[2], cc, jobs[:3]) // c claims jobs
	putAll(t, clis[0], a, jobs[3:])
	recOrders := waitSameRecord(t, "orders", all, nil)
	recEvents := waitSameRecord(t, "ch:events", all, nil)
	recJobs := waitSameRecord(t, "jobs", all, nil)
	for _, r := range []struct {
		queue string
		got   uint64
		want  *Proc
	}{{"orders", recOrders.member, a}, {"ch:events", recEvents.member, b}, {"jobs", recJobs.member, cc}} {
		if got := fmt.Sprintf("%016x", r.got); got != ids[r.want] {
			t.Fatalf("dispatcher of %s: got %s, want %s (%s)", r.queue, got, r.want.Name, ids[r.want])
		}
	}
	epoch := func(e uint64) string { return strconv.FormatUint(e, 10) }
	// The drainer is the ClickHouse queue's one consumer: it took the
	// rows and keeps them unacknowledged, as it cannot insert them.
	wantQueues := [][]string{
		{"ch:events", "b", epoch(recEvents.epoch), "4", "0", strconv.Itoa(eventsBytes), "4", "1", "queued", "-"},
		{"jobs", "c", epoch(recJobs.epoch), "6", "0", strconv.Itoa(jobsBytes), "0", "0", "queued", "-"},
		{"orders", "a", epoch(recOrders.epoch), "5", "0", strconv.Itoa(ordersBytes), "0", "0", "queued", "-"},
	}
	wantMembers := func(states, answered []string) [][]string {
		var rows [][]string
		for i, p := range all {
			rows = append(rows, []string{p.Name, ids[p], states[i], answered[i], version, p.PeerURL(), p.ClientURL()})
		}
		return rows
	}
	// check runs chute status against on and compares its output.
	check := func(on *Proc, members, queues [][]string) (statusRun, error) {
		run, err := runStatus([]*Proc{on})
		if err != nil {
			return run, err
		}
		if run.Code != 0 || run.Stderr != "" {
			return run, fmt.Errorf("exit %d, stderr %q; want 0 and none", run.Code, run.Stderr)
		}
		got, err := parseStatusOutput(run.Stdout)
		if err != nil {
			return run, fmt.Errorf("%w\n%s", err, run.Stdout)
		}
		if want := fmt.Sprintf("cluster seen by node %s (member %s, version %s) at %s", on.Name, ids[on], version, on.MetricsAddr); got.Title != want {
			return run, fmt.Errorf("title %q, want %q", got.Title, want)
		}
		eq := func(a, b []string) bool { return slices.Equal(a, b) }
		if members != nil && !slices.EqualFunc(got.Members, members, eq) {
			return run, fmt.Errorf("members %q, want %q\n%s", got.Members, members, run.Stdout)
		}
		if !slices.EqualFunc(got.Queues, queues, eq) {
			return run, fmt.Errorf("queues %q, want %q\n%s", got.Queues, queues, run.Stdout)
		}
		return run, nil
	}

	alive := wantMembers([]string{"alive", "alive", "alive"}, []string{"yes", "yes", "yes"})
	var run statusRun
	for _, on := range all {
		testutil.Eventually(t, membershipTimeout, "chute status on "+on.Name+" to show the whole cluster", func() error {
			var err error
			run, err = check(on, alive, wantQueues)
			return err
		})
	}
	t.Logf("chute status on c:\n%s", run.Stdout)

	// --json: the same for machines, ids in 16 hex digits.
	run, err := runStatus([]*Proc{b}, "--json")
	if err != nil || run.Code != 0 {
		t.Fatalf("chute status --json: %v, exit %d, stderr %q", err, run.Code, run.Stderr)
	}
	var st statusJSON
	if err := json.Unmarshal([]byte(run.Stdout), &st); err != nil {
		t.Fatalf("chute status --json: %v\n%s", err, run.Stdout)
	}
	if len(st.Members) != 3 || len(st.Queues) != 3 {
		t.Fatalf("chute status --json: %d members and %d queues, want 3 and 3\n%s", len(st.Members), len(st.Queues), run.Stdout)
	}
	for i, q := range st.Queues {
		w := wantQueues[i]
		var disp *Proc
		for _, p := range all {
			if p.Name == w[1] {
				disp = p
			}
		}
		if q.Name != w[0] || q.Dispatcher != ids[disp] || q.DispatcherName != disp.Name || !q.DispatcherAnswered || strconv.Itoa(q.Rows) != w[3] || strconv.FormatInt(q.Bytes, 10) != w[5] {
			t.Errorf("chute status --json: queue %+v, want %s dispatched by %s (%s) with %s rows, %s bytes", q, w[0], disp.Name, ids[disp], w[3], w[5])
		}
	}

	// --watch prints again; --count bounds it.
	run, err = runStatus([]*Proc{a}, "--watch", "--json", "--interval", "100ms", "--count", "2")
	if err != nil || run.Code != 0 || strings.Count(run.Stdout, "\n") != 2 {
		t.Errorf("chute status --watch --json --count 2: %v, exit %d, stderr %q; want two lines, got\n%s", err, run.Code, run.Stderr, run.Stdout)
	}

	cc.Kill()
	// jobs' dispatcher is gone: until a put elects another, its record
	// still names c, its depth (and ack mode, which only the dispatcher
	// tells) is unknown, and the command still answers.
	unknownJobs := slices.Clone(wantQueues)
	unknownJobs[1] = []string{"jobs", "c", epoch(recJobs.epoch), "?", "0", "?", "?", "?", "-", "-"}
	testutil.Eventually(t, membershipTimeout, "chute status on a to mark c and the depth of jobs unknown", func() error {
		var err error
		if run, err = check(a, nil, unknownJobs); err != nil {
			return err
		}
		got, _ := parseStatusOutput(run.Stdout)
		row := got.Members[2]
		if row[0] != "c" || !((row[2] == "failed" && row[3] == "-") || (row[2] == "alive" && row[3] == "no")) {
			return fmt.Errorf("c's row %q, want failed and not asked, or alive and not answering\n%s", row, run.Stdout)
		}
		if !slices.Contains(got.Rest, "queue jobs: its dispatcher did not answer; ROWS, BYTES, UNACKED, CONSUMERS unknown") {
			return fmt.Errorf("no note on jobs' dispatcher\n%s", run.Stdout)
		}
		return nil
	})
	t.Logf("chute status on a with c killed:\n%s", run.Stdout)
}
