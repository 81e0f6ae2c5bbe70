//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"chute/internal/chtest"
	"chute/internal/testutil"
	"chute/sink"
)

// Bounds of the servers test.
const (
	serversRows    = 3000             // rows put in all, in txns of serversTxn
	serversTxn     = 10               // rows per txn
	serversMaxCall = 10 * time.Second // a put with ack=inserted, failover included, on a busy machine
)

// TestClickHouse_threeServers runs the binary with --clickhouse-url
// naming three 18.16 servers that hold the same table, and puts rows
// with ack=inserted (a put returns once its row is in some server). One
// server is killed under load: /status shows it down, every put still
// returns, and once it is back it takes batches again. Every
// acknowledged row is in exactly one server: the three counts add up to
// what was put, with no id twice.
func TestClickHouse_threeServers(t *testing.T) {
	t.Parallel()
	var chs [3]*chtest.Server
	urls := make([]string, len(chs))
	for i := range chs {
		chs[i] = chtest.Start(t)
		chs[i].Exec(t, "CREATE TABLE default.spread (id UInt64) ENGINE = MergeTree ORDER BY id")
		urls[i] = chs[i].URL()
	}
	p := StartChute(t, "--clickhouse-url", strings.Join(urls, ","), "--clickhouse-db", "default")
	cli := clusterClient(t, p.ClientAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// One producer, one txn at a time: not held to 2 inserts a second.
	if _, err := cli.Put(ctx, "/config/queues/ch:spread", `{"ack":"inserted","max_inserts_per_second":50}`); err != nil {
		t.Fatalf("put the queue's settings: %v", err)
	}

	// The producer: txns of serversTxn rows, one after another, each
	// returning once its rows are in ClickHouse.
	var (
		mu      sync.Mutex
		acked   int
		slowest time.Duration
		putErr  error
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for id := 0; id < serversRows; id += serversTxn {
			ops := make([]clientv3.Op, serversTxn)
			for j := range ops {
				ops[j] = clientv3.OpPut(fmt.Sprintf("/q/ch:spread/p/%d", id+j), fmt.Sprintf(`{"id":%d}`, id+j))
			}
			cctx, ccancel := context.WithTimeout(ctx, serversMaxCall)
			start := time.Now()
			_, err := cli.Txn(cctx).Then(ops...).Commit()
			took := time.Since(start)
			ccancel()
			mu.Lock()
			if err != nil {
				putErr = fmt.Errorf("txn of rows %d-%d after %v: %w", id, id+serversTxn-1, took, err)
			} else {
				acked += serversTxn
				slowest = max(slowest, took)
			}
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	progress := func() int {
		mu.Lock()
		defer mu.Unlock()
		return acked
	}
	testutil.Eventually(t, rowsTimeout, "a third of the rows acknowledged", func() error {
		if n := progress(); n < serversRows/3 {
			return fmt.Errorf("%d acknowledged", n)
		}
		return nil
	})
	killed := chs[1]
	killed.Kill(t)
	testutil.Eventually(t, rowsTimeout, "/status to show "+killed.HTTPAddr()+" down", func() error {
		st, ok := serverState(p, killed.HTTPAddr())
		if !ok || st.Up {
			return fmt.Errorf("got %+v (listed %v)", st, ok)
		}
		return nil
	})
	atKill := progress()
	testutil.Eventually(t, rowsTimeout, "puts to go on with the server down", func() error {
		if n := progress(); n < atKill+serversRows/6 {
			return fmt.Errorf("%d acknowledged, %d when it went down", n, atKill)
		}
		return nil
	})
	killed.Restart(t)
	before := killed.Count(t, "default.spread")
	testutil.Eventually(t, time.Minute, killed.HTTPAddr()+" to take batches again", func() error {
		if n := killed.Count(t, "default.spread"); n <= before {
			return fmt.Errorf("%d rows, %d when it came back", n, before)
		}
		st, _ := serverState(p, killed.HTTPAddr())
		if !st.Up {
			return fmt.Errorf("/status: %+v", st)
		}
		return nil
	})
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("the producer did not finish: %d acknowledged", progress())
	}
	mu.Lock()
	defer mu.Unlock()
	if putErr != nil {
		t.Fatalf("a put failed: %v", putErr)
	}
	if acked != serversRows {
		t.Fatalf("acknowledged %d rows, want %d", acked, serversRows)
	}
	if slowest > serversMaxCall/2 {
		t.Errorf("slowest put: %v, want well under %v (a batch waited for the down server)", slowest, serversMaxCall)
	}
	seen := make(map[int]int, serversRows)
	var perServer []string
	for _, ch := range chs {
		ids := strings.Fields(ch.Query(t, "SELECT id FROM default.spread"))
		perServer = append(perServer, fmt.Sprintf("%s: %d", ch.HTTPAddr(), len(ids)))
		for _, s := range ids {
			id, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("id %q: %v", s, err)
			}
			seen[id]++
		}
	}
	var missing, twice int
	for id := range serversRows {
		switch seen[id] {
		case 0:
			missing++
		case 1:
		default:
			twice++
		}
	}
	if missing > 0 || twice > 0 || len(seen) != serversRows {
		t.Errorf("rows over the three servers (%s): %d missing, %d stored more than once, %d distinct; want each of %d once",
			strings.Join(perServer, ", "), missing, twice, len(seen), serversRows)
	}
	t.Logf("rows per server: %s; slowest put %v", strings.Join(perServer, ", "), slowest)
}

// serverState returns the server at addr as p's /status shows it.
func serverState(p *Proc, addr string) (sink.ServerState, bool) {
	st, err := statusOf(p)
	if err != nil {
		return sink.ServerState{}, false
	}
	for _, s := range st.ClickHouseServers {
		if s.Server == addr {
			return s, true
		}
	}
	return sink.ServerState{}, false
}

// TestClickHouse_insertSettingsEtcdctl sets a queue's insert settings
// with etcdctl: with input_format_skip_unknown_fields a row with a field
// the table lacks lands; the same row in a queue without it is a dead
// letter; a setting whose name could change the request is refused.
func TestClickHouse_insertSettingsEtcdctl(t *testing.T) {
	t.Parallel()
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default.wide (id UInt64, msg String) ENGINE = MergeTree ORDER BY id")
	ch.Exec(t, "CREATE TABLE default.narrow (id UInt64, msg String) ENGINE = MergeTree ORDER BY id")
	p := StartChute(t, chFlags(ch)...)
	etcdctl := lookTool(t, "etcdctl")
	ctl := func(args ...string) ctlResult {
		t.Helper()
		res, err := runEtcdctl(etcdctl, p.ClientAddr, "", args...)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := ctl("put", "/config/queues/ch:wide", `{"settings":{"input_format_skip_unknown_fields":1}}`); res.Code != 0 {
		t.Fatalf("put the settings: %+v", res)
	}
	row := `{"id":7,"msg":"x","extra":1}`
	for _, q := range []string{"ch:wide", "ch:narrow"} {
		if res := ctl("put", "/q/"+q+"/p/7", row); res.Code != 0 {
			t.Fatalf("put to %s: %+v", q, res)
		}
	}
	waitQuery(t, ch, rowsTimeout, "SELECT id, msg FROM default.wide", "7\tx")
	testutil.Eventually(t, rowsTimeout, "the row without the setting to be a dead letter", func() error {
		letters, raw := ctlDeadLetters(t, p, "ch:narrow")
		for _, l := range letters {
			if l.Code == 117 && l.Row == row {
				return nil
			}
		}
		return fmt.Errorf("got %q", raw)
	})
	if n := ch.Count(t, "default.narrow"); n != 0 {
		t.Errorf("rows in default.narrow: got %d, want 0", n)
	}
	for _, bad := range []string{`{"settings":{"a&query=DROP":1}}`, `{"settings":{"x'y":1}}`} {
		res := ctl("put", "/config/queues/ch:wide", bad)
		if res.Code == 0 || !strings.Contains(res.Stderr, "InvalidArgument") || !strings.Contains(res.Stderr, "settings") {
			t.Errorf("put %s: got exit %d, %q; want InvalidArgument naming the settings", bad, res.Code, res.Stderr)
		}
	}
}
