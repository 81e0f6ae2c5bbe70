//go:build e2e

package e2e

import (
	"bytes"
	"context"
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

// `chute status` (cmd/chute/status.go) prints, for each endpoint, a title
// line, a blank line, the members table, a blank line, the queues table
// and a blank line. Tables are text/tabwriter columns: every cell of a
// column starts where its header does.

// Columns of the two tables of `chute status`.
var (
	statusMemberCols = []string{"MEMBER", "ID", "STATUS", "PEER URLS", "CLIENT URLS"}
	statusQueueCols  = []string{"QUEUE", "DISPATCHER", "EPOCH", "ROWS", "HELD", "BYTES", "UNACKED", "CONSUMERS", "LOCAL CONSUMERS", "ACK", "BACKUP"}
)

// statusBlock is what `chute status` prints for one endpoint.
type statusBlock struct {
	Title   string
	Members [][]string // rows of cells, in printed order
	Queues  [][]string
}

// statusRun is one run of `chute status`.
type statusRun struct {
	Stdout, Stderr string
	Code           int
}

// runStatus runs the chute binary's `chute status --endpoints` on the
// metrics listeners of nodes.
func runStatus(nodes ...*Proc) (statusRun, error) {
	eps := make([]string, len(nodes))
	for i, p := range nodes {
		eps[i] = p.MetricsAddr
	}
	ctx, cancel := context.WithTimeout(context.Background(), ctlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, chuteBin, "status", "--endpoints", strings.Join(eps, ","), "--timeout", "2s")
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

// parseStatusOutput splits the stdout of `chute status` into its blocks,
// requiring the layout exactly: title, blank, members table, blank,
// queues table, blank, for each endpoint.
func parseStatusOutput(out string) ([]statusBlock, error) {
	if !strings.HasSuffix(out, "\n") {
		return nil, fmt.Errorf("output does not end with a newline: %q", out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var blocks []statusBlock
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
	for i < len(lines) {
		b := statusBlock{Title: lines[i]}
		if !strings.HasPrefix(b.Title, "node ") {
			return nil, fmt.Errorf("line %d: %q, want a title \"node ...\"", i+1, b.Title)
		}
		if i+1 >= len(lines) || lines[i+1] != "" {
			return nil, fmt.Errorf("line %d: want a blank line after the title", i+2)
		}
		i += 2
		var err error
		if b.Members, err = table(statusMemberCols); err != nil {
			return nil, err
		}
		if b.Queues, err = table(statusQueueCols); err != nil {
			return nil, err
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
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

// wantStatusBlock is the block `chute status` prints for node p when p
// sees members with the given states and holds queues.
func wantStatusBlock(p *Proc, ids map[*Proc]string, version string, members []*Proc, states []string, queues [][]string) statusBlock {
	b := statusBlock{
		Title:  fmt.Sprintf("node %s (member %s, version %s) at %s", p.Name, ids[p], version, p.MetricsAddr),
		Queues: queues,
	}
	for i, m := range members {
		b.Members = append(b.Members, []string{m.Name, ids[m], states[i], m.PeerURL(), m.ClientURL()})
	}
	return b
}

// diffStatusBlocks describes how got differs from want, or returns "".
func diffStatusBlocks(got, want []statusBlock) string {
	var diffs []string
	if len(got) != len(want) {
		diffs = append(diffs, fmt.Sprintf("%d blocks, want %d", len(got), len(want)))
	}
	for i := range min(len(got), len(want)) {
		g, w := got[i], want[i]
		if g.Title != w.Title {
			diffs = append(diffs, fmt.Sprintf("block %d: title %q, want %q", i, g.Title, w.Title))
		}
		eq := func(a, b []string) bool { return slices.Equal(a, b) }
		if !slices.EqualFunc(g.Members, w.Members, eq) {
			diffs = append(diffs, fmt.Sprintf("block %d (%s): members %q, want %q", i, w.Title, g.Members, w.Members))
		}
		if !slices.EqualFunc(g.Queues, w.Queues, eq) {
			diffs = append(diffs, fmt.Sprintf("block %d (%s): queues %q, want %q", i, w.Title, g.Queues, w.Queues))
		}
	}
	return strings.Join(diffs, "; ")
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

// TestStatus_threeNodes runs `chute status` against the metrics listeners
// of a three-node cluster holding two queues: "orders", an ordinary queue
// without consumers produced on a (which dispatches it) and on c (which
// forwards to a), and "ch:events", a ClickHouse queue produced on b, whose
// rows stay queued, held by its drainer, because no --clickhouse-url is
// set. Each node's block
// lists a, b and c alive with their ids and URLs, and the queues that node
// holds with their dispatcher, epoch and depth in rows and bytes. After c
// is killed (SIGKILL), a and b list it failed, while c's endpoint is
// reported on stderr and the command exits 1.
func TestStatus_threeNodes(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a, b, cc := c.startThree()
	all := []*Proc{a, b, cc}
	version := chuteVersion(t)
	ids := make(map[*Proc]string)
	for _, p := range all {
		ids[p] = strconv.FormatUint(memberID(t, p), 16)
	}

	// depth_bytes counts each message's value and the last segment of its
	// producer key.
	var orders, events [][2]string
	var ordersBytes, eventsBytes int
	for i, on := range []string{"a", "a", "a", "c", "c"} {
		tail := fmt.Sprintf("%s-%05d", on, i)
		orders = append(orders, [2]string{"/q/orders/p/" + tail, "order " + tail})
		ordersBytes += len(tail) + len("order "+tail)
	}
	for i := range 4 {
		tail, row := strconv.Itoa(i), fmt.Sprintf(`{"id":%d,"s":"row %d"}`, i, i)
		events = append(events, [2]string{"/q/ch:events/p/" + tail, row})
		eventsBytes += len(tail) + len(row)
	}
	clis := clientsOf(t, all...)
	putAll(t, clis[0], a, orders[:3]) // a claims orders
	putAll(t, clis[2], cc, orders[3:])
	putAll(t, clis[1], b, events) // b claims ch:events
	recOrders := waitSameRecord(t, "orders", all, nil)
	recEvents := waitSameRecord(t, "ch:events", all, nil)
	if got, want := strconv.FormatUint(recOrders.member, 16), ids[a]; got != want {
		t.Fatalf("dispatcher of orders: got %s, want a (%s)", got, want)
	}
	if got, want := strconv.FormatUint(recEvents.member, 16), ids[b]; got != want {
		t.Fatalf("dispatcher of ch:events: got %s, want b (%s)", got, want)
	}
	// Each node lists the queues it holds. The drainer is the ClickHouse
	// queue's one consumer: it took the rows and keeps them
	// unacknowledged, as it cannot insert them.
	queuesOf := map[*Proc][][]string{
		a:  {{"orders", ids[a], strconv.FormatUint(recOrders.epoch, 10), "5", "0", strconv.Itoa(ordersBytes), "0", "0", "0", "queued", "-"}},
		b:  {{"ch:events", ids[b], strconv.FormatUint(recEvents.epoch, 10), "4", "0", strconv.Itoa(eventsBytes), "4", "1", "0", "queued", "-"}},
		cc: nil, // c forwarded its puts and holds nothing
	}

	var run statusRun
	testutil.Eventually(t, membershipTimeout, "chute status to show three alive members and both queues", func() error {
		var err error
		if run, err = runStatus(all...); err != nil {
			return err
		}
		if run.Code != 0 || run.Stderr != "" {
			return fmt.Errorf("exit %d, stderr %q; want 0 and none", run.Code, run.Stderr)
		}
		got, err := parseStatusOutput(run.Stdout)
		if err != nil {
			return fmt.Errorf("%w\n%s", err, run.Stdout)
		}
		var want []statusBlock
		for _, p := range all {
			want = append(want, wantStatusBlock(p, ids, version, all, []string{"alive", "alive", "alive"}, queuesOf[p]))
		}
		if d := diffStatusBlocks(got, want); d != "" {
			return fmt.Errorf("%s\n%s", d, run.Stdout)
		}
		return nil
	})
	t.Logf("chute status of three nodes:\n%s", run.Stdout)

	cc.Kill()
	// c stays failed until serf reaps it (10 s with the fast profile):
	// the whole output is checked in the same run that first shows it.
	testutil.Eventually(t, membershipTimeout, "chute status to show c failed on a and b", func() error {
		var err error
		if run, err = runStatus(all...); err != nil {
			return err
		}
		got, err := parseStatusOutput(run.Stdout)
		if err != nil {
			return fmt.Errorf("%w\n%s", err, run.Stdout)
		}
		var want []statusBlock
		for _, p := range []*Proc{a, b} {
			want = append(want, wantStatusBlock(p, ids, version, all, []string{"alive", "alive", "failed"}, queuesOf[p]))
		}
		if d := diffStatusBlocks(got, want); d != "" {
			return fmt.Errorf("%s\n%s", d, run.Stdout)
		}
		return nil
	})
	wantErr := "chute status: " + cc.MetricsAddr + ": "
	if run.Code != 1 || !strings.HasPrefix(run.Stderr, wantErr) || strings.Count(run.Stderr, "\n") != 1 {
		t.Errorf("chute status with c killed: exit %d, stderr %q; want 1 and one line starting %q", run.Code, run.Stderr, wantErr)
	}
	t.Logf("chute status with c killed:\n%s", run.Stdout)
}
