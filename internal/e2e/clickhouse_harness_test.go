//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"chute/internal/chtest"
	"chute/internal/testutil"
)

// ClickHouse tests run the chute binary with --clickhouse-url
// and --clickhouse-db against a private clickhouse-server 18.16 started by
// internal/chtest on free 127.0.0.1 ports (about 0.2 s each, so every test
// has its own), put rows with etcdctl and clientv3, and read what arrived
// with SELECTs, what waits with GET /status and what went wrong with the
// node's log and its dead letters under /q/{queue}/dlq/.

// Bounds of the ClickHouse tests' waits. Each is polled, never slept through.
const (
	rowsTimeout  = 30 * time.Second // rows put to reach their table
	chLogTimeout = 10 * time.Second // a line to appear in a node's log
	loadTimeout  = 20 * time.Second // one transaction of a load test, on a busy 2-core machine
)

// chFlags are chute's flags for ch: its URL as the default user, and the
// default database.
func chFlags(ch *chtest.Server) []string {
	return []string{"--clickhouse-url", ch.URL(), "--clickhouse-db", "default"}
}

// waitQuery polls sql on ch until it answers want (TabSeparated, without
// the final newline).
func waitQuery(t testing.TB, ch *chtest.Server, timeout time.Duration, sql, want string) {
	t.Helper()
	testutil.Eventually(t, timeout, fmt.Sprintf("%s to answer %q", sql, want), func() error {
		if got := ch.Query(t, sql); got != want {
			return fmt.Errorf("got %q", got)
		}
		return nil
	})
}

// logText returns everything p has logged, over all its runs.
func logText(t testing.TB, p *Proc) string {
	t.Helper()
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		t.Fatalf("read the log of %s: %v", p, err)
	}
	return string(b)
}

// logLines returns the lines of p's log that contain every one of subs.
func logLines(t testing.TB, p *Proc, subs ...string) []string {
	t.Helper()
	var out []string
	for line := range strings.Lines(logText(t, p)) {
		all := true
		for _, s := range subs {
			if !strings.Contains(line, s) {
				all = false
				break
			}
		}
		if all {
			out = append(out, strings.TrimSuffix(line, "\n"))
		}
	}
	return out
}

// waitLogLine polls p's log until a line contains every one of subs, and
// returns the first such line.
func waitLogLine(t testing.TB, p *Proc, subs ...string) string {
	t.Helper()
	var line string
	testutil.Eventually(t, chLogTimeout, fmt.Sprintf("a line of %s's log with %q", p.Name, subs), func() error {
		if lines := logLines(t, p, subs...); len(lines) > 0 {
			line = lines[0]
			return nil
		}
		return fmt.Errorf("none yet")
	})
	return line
}

// depthOf returns depth_rows of queue on p, 0 when p does not know it.
func depthOf(p *Proc, queue string) (int, error) {
	q, _, err := queueOn(p, queue)
	return q.Rows, err
}

// waitDepth polls p's /status until queue holds want rows.
func waitDepth(t testing.TB, p *Proc, queue string, want int) {
	t.Helper()
	testutil.Eventually(t, drainTimeout, fmt.Sprintf("depth_rows of %s on %s to be %d", queue, p.Name, want), func() error {
		got, err := depthOf(p, queue)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("got %d", got)
		}
		return nil
	})
}

// requireDepth fails the test unless queue holds want rows on p now.
func requireDepth(t testing.TB, p *Proc, queue string, want int) {
	t.Helper()
	got, err := depthOf(p, queue)
	if err != nil {
		t.Fatalf("/status of %s: %v", p.Name, err)
	}
	if got != want {
		t.Fatalf("depth_rows of %s on %s: got %d, want %d", queue, p.Name, got, want)
	}
}

// ctlPutLoops puts rows from to to-1 into /q/{queue}/p/{n} on p with
// etcdctl, one process per put, run by loops shell loops side by side.
// format is the value, a printf format that takes n twice, such as
// {"id":%d,"s":"row %d"}. It fails the test unless every etcdctl printed
// OK and exited 0.
func ctlPutLoops(t testing.TB, p *Proc, queue, format string, from, to, loops int) {
	t.Helper()
	const script = `ctl=$1 ep=$2 prefix=$3 format=$4 i=$5 end=$6
while [ "$i" -lt "$end" ]; do
	"$ctl" --endpoints "$ep" put "$prefix$i" "$(printf "$format" "$i" "$i")" || exit 1
	i=$((i+1))
done`
	etcdctl := lookTool(t, "etcdctl")
	per := (to - from + loops - 1) / loops
	// An etcdctl run takes 20-50 ms, several times that on a busy machine.
	ctx, cancel := context.WithTimeout(context.Background(), ctlTimeout+time.Duration(per)*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var errs errorOnce
	for lo := from; lo < to; lo += per {
		hi := min(lo+per, to)
		wg.Go(func() {
			cmd := exec.CommandContext(ctx, "sh", "-c", script, "sh",
				etcdctl, p.ClientAddr, "/q/"+queue+"/p/", format, strconv.Itoa(lo), strconv.Itoa(hi))
			cmd.Env = etcdctlEnv()
			out, err := cmd.CombinedOutput()
			if err != nil {
				errs.set(fmt.Errorf("etcdctl put loop %d..%d: %v:\n%s", lo, hi-1, err, out))
				return
			}
			if got := strings.Count(string(out), "OK\n"); got != hi-lo || len(out) != 3*got {
				errs.set(fmt.Errorf("etcdctl put loop %d..%d: got %d OK lines in %q, want %d", lo, hi-1, got, out, hi-lo))
			}
		})
	}
	wg.Wait()
	if err := errs.get(); err != nil {
		t.Fatal(err)
	}
}

// putOps commits ops through cli in transactions of up to batch puts and
// returns each transaction's latency.
func putOps(t testing.TB, cli *clientv3.Client, ops []clientv3.Op, batch int) []time.Duration {
	t.Helper()
	var lat []time.Duration
	for len(ops) > 0 {
		n := min(batch, len(ops))
		ctx, cancel := rpcCtx()
		start := time.Now()
		_, err := cli.Txn(ctx).Then(ops[:n]...).Commit()
		lat = append(lat, time.Since(start))
		cancel()
		if err != nil {
			t.Fatalf("txn of %d puts: %v", n, err)
		}
		ops = ops[n:]
	}
	return lat
}

// deadLetter is the value of /q/{queue}/dlq/{seq} (docs/clickhouse.md).
type deadLetter struct {
	Table string `json:"table"`
	Key   string `json:"key"`
	Code  int    `json:"code"`
	Error string `json:"error"`
	Row   string `json:"row"`
}

// ctlDeadLetters reads the dead letters of queue on p with `etcdctl get
// --prefix /q/{queue}/dlq/`: key to letter, and the raw output.
func ctlDeadLetters(t testing.TB, p *Proc, queue string) (map[string]deadLetter, string) {
	t.Helper()
	out := ctlOK(t, p, "", "get", "--prefix", "/q/"+queue+"/dlq/")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	letters := make(map[string]deadLetter)
	if out == "" {
		return letters, out
	}
	if len(lines)%2 != 0 {
		t.Fatalf("etcdctl get --prefix /q/%s/dlq/: %q: want key and value lines", queue, out)
	}
	for i := 0; i < len(lines); i += 2 {
		var l deadLetter
		if err := json.Unmarshal([]byte(lines[i+1]), &l); err != nil {
			t.Fatalf("dead letter %s: %q: %v", lines[i], lines[i+1], err)
		}
		letters[lines[i]] = l
	}
	return letters, out
}
