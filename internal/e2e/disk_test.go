//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"chute/internal/chtest"
)

// Queues on disk: every node keeps the messages in its custody in a queue
// log under --data-dir/queues. These tests stop a lone node, which has
// nobody to hand its queues to, and start it again on the same data dir.

// putBatchInterval sets a ch: queue's batch interval to a minute, so that
// rows put after the first insert wait for the shutdown's flush.
func putBatchInterval(t *testing.T, cli *clientv3.Client, queue string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "/config/queues/"+queue, `{"batch_interval":"1m"}`); err != nil {
		t.Fatalf("put the settings of %s: %v", queue, err)
	}
}

// putRows puts rows {"id":i} for i in [0, n) to /q/{queue}/p/{i}.
func putRows(t *testing.T, cli *clientv3.Client, queue string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range n {
		if _, err := cli.Put(ctx, fmt.Sprintf("/q/%s/p/%d", queue, i), fmt.Sprintf(`{"id":%d}`, i)); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
}

// TestDisk_loneNodeSIGTERMFlushes: a lone node with rows waiting for a
// one-minute batch interval inserts them when it gets SIGTERM, and exits
// 0, without trying to hand its raft leadership to nobody.
func TestDisk_loneNodeSIGTERMFlushes(t *testing.T) {
	t.Parallel()
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default.events (id UInt64) ENGINE = MergeTree ORDER BY id")
	p := StartChute(t, chFlags(ch)...)
	cli := clusterClient(t, p.ClientAddr)
	putBatchInterval(t, cli, "ch:events")
	putRows(t, cli, "ch:events", 3)
	if err := p.Stop(); err != nil {
		t.Fatalf("SIGTERM: %v, want exit status 0\n%s", err, p.Log())
	}
	if got := ch.Query(t, "SELECT count(), uniqExact(id) FROM default.events"); got != "3\t3" {
		t.Fatalf("after SIGTERM: count, ids %q, want 3 rows", got)
	}
	if lines := logLines(t, p, "rows left on disk"); len(lines) != 0 {
		t.Errorf("rows left on disk though ClickHouse was up: %q", lines)
	}
	if lines := logLines(t, p, "leadership not handed over"); len(lines) != 0 {
		t.Errorf("a lone voter tried to hand its leadership over: %q", lines)
	}
}

// TestDisk_loneNodeClickHouseDownKeepsRows: with ClickHouse down, a lone
// node's SIGTERM leaves the rows in its queue log (exit 0, one INFO line
// naming the queue and its 3 rows) without waiting the 6 s it gives a
// flush (it stopped after 7 s before: waiting for inserts that could not
// succeed); started again on the same data dir with ClickHouse up, it
// inserts them.
func TestDisk_loneNodeClickHouseDownKeepsRows(t *testing.T) {
	t.Parallel()
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default.events (id UInt64) ENGINE = MergeTree ORDER BY id")
	p := StartChute(t, chFlags(ch)...)
	cli := clusterClient(t, p.ClientAddr)
	putBatchInterval(t, cli, "ch:events")
	ch.Stop(t)
	putRows(t, cli, "ch:events", 3)
	start := time.Now()
	if err := p.Stop(); err != nil {
		t.Fatalf("SIGTERM with ClickHouse down: %v, want exit status 0\n%s", err, p.Log())
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("SIGTERM with ClickHouse down took %v to exit, want well under the 6 s a flush may take\n%s", took, p.Log())
	}
	lines := logLines(t, p, "level=INFO", "rows left on disk", "queue=ch:events", "rows=3")
	if len(lines) != 1 {
		t.Fatalf("got %d INFO lines naming ch:events and 3 rows left on disk, want 1\n%s", len(lines), p.Log())
	}
	if lines := logLines(t, p, "level=ERROR"); len(lines) != 0 {
		t.Errorf("ERROR lines at a shutdown that lost nothing: %q", lines)
	}

	ch.Restart(t)
	p.Restart(t)
	waitQuery(t, ch, rowsTimeout, "SELECT count(), uniqExact(id), min(id), max(id) FROM default.events", "3\t3\t0\t2")
	waitDrained(t, "ch:events", p)
}

// TestDisk_damagedSegmentRecovers: a queue log segment whose last 100
// bytes are garbage, or which ends inside a record, costs only the last
// record: the node starts, recovers every record before the damage, and
// warns once.
func TestDisk_damagedSegmentRecovers(t *testing.T) {
	t.Parallel()
	const n = 10
	value := func(i int) string { return fmt.Sprintf("row-%02d-%s", i, strings.Repeat("x", 200)) } // a record over 100 bytes
	for _, tc := range []struct {
		name   string
		damage func(path string, size int64) error
	}{
		{"garbage tail", func(path string, size int64) error {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteAt([]byte(strings.Repeat("\xa5", 100)), size-100)
			return err
		}},
		{"truncated mid-record", func(path string, size int64) error { return os.Truncate(path, size-50) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := StartChute(t)
			cli := clusterClient(t, p.ClientAddr)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for i := range n {
				if _, err := cli.Put(ctx, fmt.Sprintf("/q/jobs/p/%d", i), value(i)); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.Stop(); err != nil {
				t.Fatalf("SIGTERM: %v", err)
			}
			segs, err := filepath.Glob(filepath.Join(p.DataDir, "queues", "*.qlog"))
			if err != nil || len(segs) != 1 {
				t.Fatalf("segments under %s: %v, %v; want one", p.DataDir, segs, err)
			}
			fi, err := os.Stat(segs[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.damage(segs[0], fi.Size()); err != nil {
				t.Fatal(err)
			}

			p.Restart(t)
			warns := logLines(t, p, "level=WARN", "qlog: cut a damaged segment")
			if len(warns) != 1 {
				t.Fatalf("got %d warnings of a damaged segment, want 1\n%s", len(warns), p.Log())
			}
			waitDepth(t, p, "jobs", n-1)
			wc := cli.Watch(ctx, "/q/jobs/c/w1")
			var got []string
			for len(got) < n-1 {
				select {
				case resp := <-wc:
					for _, ev := range resp.Events {
						got = append(got, string(ev.Kv.Value))
					}
				case <-ctx.Done():
					t.Fatalf("got %d deliveries, want %d", len(got), n-1)
				}
			}
			slices.Sort(got)
			for i := range n - 1 {
				if got[i] != value(i) {
					t.Fatalf("delivery %d after recovery: %.12q, want %.12q", i, got[i], value(i))
				}
			}
		})
	}
}

// TestDisk_flags: --unsafe-no-fsync is logged at start as unsafe, and a
// put that would take the queue log past --quota-backend-bytes fails
// with etcd's "database space exceeded" and raises the NOSPACE alarm, as
// etcd's backend quota does; the queue keeps what fit.
func TestDisk_flags(t *testing.T) {
	t.Parallel()
	p := StartChute(t, "--unsafe-no-fsync", "--quota-backend-bytes", "4096")
	waitLogLine(t, p, "level=WARN", "--unsafe-no-fsync")
	cli := clusterClient(t, p.ClientAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	value := strings.Repeat("x", 1000)
	var err error
	put := 0
	for ; put < 10; put++ {
		if _, err = cli.Put(ctx, fmt.Sprintf("/q/jobs/p/%d", put), value); err != nil {
			break
		}
	}
	if err == nil || !strings.Contains(err.Error(), "etcdserver: mvcc: database space exceeded") {
		t.Fatalf("10 puts of 1000 bytes under a 4096-byte quota: got %v after %d, want database space exceeded", err, put)
	}
	if put == 0 {
		t.Fatal("the first put failed: the quota left no room at all")
	}
	requireDepth(t, p, "jobs", put)
	alarms, err := cli.AlarmList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(alarms.Alarms) != 1 || alarms.Alarms[0].Alarm != etcdserverpb.AlarmType_NOSPACE {
		t.Fatalf("alarms after the queue log refused a put: %v, want NOSPACE", alarms.Alarms)
	}
}

// TestDisk_killedNodeRecovers: with ack=queued a put returns once the
// message is on the dispatcher's disk, so a lone node killed with
// SIGKILL, started again on its data dir, still has every acknowledged
// message and delivers each.
func TestDisk_killedNodeRecovers(t *testing.T) {
	t.Parallel()
	const n = 5
	p := StartChute(t)
	cli := clusterClient(t, p.ClientAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range n {
		if _, err := cli.Put(ctx, fmt.Sprintf("/q/jobs/p/%d", i), fmt.Sprintf("m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	p.Kill()
	p.Restart(t)
	waitDepth(t, p, "jobs", n)
	wc := cli.Watch(ctx, "/q/jobs/c/w1")
	var got []string
	for len(got) < n {
		select {
		case resp := <-wc:
			for _, ev := range resp.Events {
				got = append(got, string(ev.Kv.Value))
			}
		case <-ctx.Done():
			t.Fatalf("got %q after the restart, want %d messages", got, n)
		}
	}
	slices.Sort(got)
	if want := []string{"m0", "m1", "m2", "m3", "m4"}; !slices.Equal(got, want) {
		t.Fatalf("after SIGKILL and a restart got %q, want %q", got, want)
	}
}
