//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"

	"chute/internal/chtest"
	"chute/internal/testutil"
)

// Bounds of the quota test.
const (
	quotaBytes     = 8 << 20
	quotaRowBytes  = 4 << 10 // a row's JSON
	quotaProducers = 16      // puts in flight: fsyncs are group commits
	quotaMaxPuts   = 2 * quotaBytes / quotaRowBytes
)

// quotaRow is row id: {"id":id,"pad":"xxx..."}, quotaRowBytes long.
func quotaRow(id int) string {
	head := fmt.Sprintf(`{"id":%d,"pad":"`, id)
	return head + strings.Repeat("x", quotaRowBytes-len(head)-2) + `"}`
}

// isNoSpace reports whether err is etcd's "database space exceeded", as
// clientv3 decodes it: ResourceExhausted with etcd's text.
func isNoSpace(err error) bool {
	var ee rpctypes.EtcdError
	return errors.As(err, &ee) && ee.Code() == codes.ResourceExhausted &&
		ee.Error() == "etcdserver: mvcc: database space exceeded" && errors.Is(err, rpctypes.ErrNoSpace)
}

// queueLogBytes is the size of p's queue log's files of the given
// kinds: "*.qlog" its segments, "*.spare" deleted ones kept to be
// written over.
func queueLogBytes(t testing.TB, p *Proc, kinds ...string) int64 {
	t.Helper()
	var segs []string
	for _, k := range kinds {
		m, err := filepath.Glob(filepath.Join(p.DataDir, "queues", k))
		if err != nil {
			t.Fatal(err)
		}
		segs = append(segs, m...)
	}
	var n int64
	for _, s := range segs {
		fi, err := os.Stat(s)
		if err != nil && !errors.Is(err, os.ErrNotExist) { // deleted meanwhile
			t.Fatal(err)
		}
		if err == nil {
			n += fi.Size()
		}
	}
	return n
}

// fillToQuota puts rows to /q/{queue}/p/{id} from quotaProducers clients
// until each is refused, and returns the ids acknowledged. It fails the
// test on any error but etcd's "database space exceeded", and when
// quotaMaxPuts puts all succeed.
func fillToQuota(t *testing.T, cli *clientv3.Client, queue string) []int {
	t.Helper()
	var (
		next    atomic.Int64
		mu      sync.Mutex
		acked   []int
		refused int
		other   []error
		wg      sync.WaitGroup
	)
	for range quotaProducers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				id := int(next.Add(1)) - 1
				if id >= quotaMaxPuts {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), loadTimeout)
				_, err := cli.Put(ctx, fmt.Sprintf("/q/%s/p/%d", queue, id), quotaRow(id))
				cancel()
				mu.Lock()
				switch {
				case err == nil:
					acked = append(acked, id)
				case isNoSpace(err):
					refused++
				default:
					other = append(other, fmt.Errorf("put %d: %w", id, err))
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(other) > 0 {
		t.Fatalf("%d puts failed with another error than database space exceeded, first: %v", len(other), other[0])
	}
	if refused == 0 {
		t.Fatalf("%d puts of %d bytes under a quota of %d bytes: none refused", len(acked), quotaRowBytes, quotaBytes)
	}
	slices.Sort(acked)
	return acked
}

// ctlAlarms runs etcdctl alarm list (or disarm) on p and returns what it
// printed.
func ctlAlarms(t *testing.T, etcdctl string, p *Proc, action string) string {
	t.Helper()
	res, err := runEtcdctl(etcdctl, p.ClientAddr, "", "alarm", action)
	if err != nil || res.Code != 0 {
		t.Fatalf("etcdctl alarm %s: %v %+v", action, err, res)
	}
	return res.Stdout
}

// ctlPutRefused checks that etcdctl's put of row id to queue fails with
// etcd's "database space exceeded". The row is as large as those that
// filled the log, so the log has no room for it either.
func ctlPutRefused(t *testing.T, etcdctl string, p *Proc, queue string, id int, when string) {
	t.Helper()
	res, err := runEtcdctl(etcdctl, p.ClientAddr, "", "put", fmt.Sprintf("/q/%s/p/%d", queue, id), quotaRow(id))
	if err != nil || res.Code == 0 || !strings.Contains(res.Stderr, "etcdserver: mvcc: database space exceeded") {
		t.Fatalf("etcdctl put %s: %v %+v, want database space exceeded", when, err, res)
	}
}

// TestDisk_quotaClickHouseDown: under --quota-backend-bytes of 8 MiB,
// fsync on, with ClickHouse down, a ch: queue takes puts until its log
// holds about 8 MiB, then refuses them with etcd's "database space
// exceeded" and raises NOSPACE, which etcdctl lists. As on etcd the
// alarm stays until disarmed, and a disarm while the log is still full
// lasts until the next put. Once ClickHouse is back every acknowledged
// row lands exactly once, the log's segments are deleted, and after
// etcdctl alarm disarm puts go on.
func TestDisk_quotaClickHouseDown(t *testing.T) {
	t.Parallel()
	const queue = "ch:quota"
	started := time.Now()
	etcdctl := lookTool(t, "etcdctl")
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default.quota (id UInt64, pad String) ENGINE = MergeTree ORDER BY id")
	p := StartChute(t, append(chFlags(ch), "--quota-backend-bytes", strconv.Itoa(quotaBytes))...)
	cli := clusterClient(t, p.ClientAddr)
	// Retries at most a second apart: the rows land soon after ClickHouse
	// is back, not after the default 30 s backoff.
	ctx, cancel := rpcCtx()
	_, err := cli.Put(ctx, "/config/queues/"+queue, `{"retry_max":"1s"}`)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	ch.Stop(t)

	acked := fillToQuota(t, cli, queue)
	filled := time.Since(started)
	var rowBytes int64
	for _, id := range acked {
		rowBytes += int64(len(quotaRow(id)))
	}
	onDisk := queueLogBytes(t, p, "*.qlog", "*.spare")
	t.Logf("%d puts of %d bytes acknowledged (%d bytes of rows), queue log %d bytes, at %v",
		len(acked), quotaRowBytes, rowBytes, onDisk, filled.Round(time.Millisecond))
	if onDisk > quotaBytes {
		t.Errorf("queue log %d bytes, above the quota %d", onDisk, quotaBytes)
	}
	// Refused once the data is near the quota, not far earlier: the log
	// adds a few dozen bytes a record and 32 a segment.
	if rowBytes < quotaBytes*15/16 {
		t.Errorf("refused after %d bytes of rows, want about %d", rowBytes, quotaBytes)
	}
	requireDepth(t, p, queue, len(acked))

	wantAlarm := fmt.Sprintf("memberID:%d alarm:NOSPACE \n", memberID(t, p))
	if got := ctlAlarms(t, etcdctl, p, "list"); got != wantAlarm {
		t.Fatalf("etcdctl alarm list with the queue log full: %q, want %q", got, wantAlarm)
	}
	ctlPutRefused(t, etcdctl, p, queue, quotaMaxPuts, "under NOSPACE")

	// Disarmed while the log is full, the next put is refused by the
	// quota itself and raises the alarm again.
	if got := ctlAlarms(t, etcdctl, p, "disarm"); got != wantAlarm {
		t.Fatalf("etcdctl alarm disarm: %q, want %q", got, wantAlarm)
	}
	ctlPutRefused(t, etcdctl, p, queue, quotaMaxPuts, "disarmed with the log full")
	if got := ctlAlarms(t, etcdctl, p, "list"); got != wantAlarm {
		t.Fatalf("etcdctl alarm list after a put into a full log: %q, want %q", got, wantAlarm)
	}

	ch.Restart(t)
	restarted := time.Now()
	waitQuery(t, ch, rowsTimeout, "SELECT count(), uniqExact(id) FROM default.quota",
		fmt.Sprintf("%d\t%d", len(acked), len(acked)))
	landed := time.Since(restarted)
	waitDrained(t, queue, p)
	// The inserted rows' segments are deleted: at most the head remains,
	// and up to two kept to be written over, within the quota.
	testutil.Eventually(t, drainTimeout, "the queue log's segments deleted", func() error {
		if n := queueLogBytes(t, p, "*.qlog"); n > quotaBytes/4+4096 {
			return fmt.Errorf("queue log segments %d bytes", n)
		}
		if n := queueLogBytes(t, p, "*.qlog", "*.spare"); n > quotaBytes {
			return fmt.Errorf("queue log files %d bytes, past the quota", n)
		}
		return nil
	})
	// Space is free, but the alarm stays until disarmed, as on etcd.
	if got := ctlAlarms(t, etcdctl, p, "list"); got != wantAlarm {
		t.Fatalf("etcdctl alarm list once the rows are inserted: %q, want %q", got, wantAlarm)
	}
	ctlPutRefused(t, etcdctl, p, queue, quotaMaxPuts, "with space freed, before disarm")

	if got := ctlAlarms(t, etcdctl, p, "disarm"); got != wantAlarm {
		t.Fatalf("etcdctl alarm disarm: %q, want %q", got, wantAlarm)
	}
	if got := ctlAlarms(t, etcdctl, p, "list"); got != "" {
		t.Fatalf("etcdctl alarm list after disarm: %q, want nothing", got)
	}
	const more = 10
	for i := range more {
		id := quotaMaxPuts + 1 + i
		ctx, cancel := rpcCtx()
		_, err := cli.Put(ctx, fmt.Sprintf("/q/%s/p/%d", queue, id), quotaRow(id))
		cancel()
		if err != nil {
			t.Fatalf("put %d after disarm: %v", id, err)
		}
		acked = append(acked, id)
	}
	res, err := runEtcdctl(etcdctl, p.ClientAddr, "", "put", "/plain", "v")
	if err != nil || res.Code != 0 {
		t.Fatalf("etcdctl put after disarm: %v %+v", err, res)
	}
	waitQuery(t, ch, rowsTimeout, "SELECT count(), uniqExact(id) FROM default.quota",
		fmt.Sprintf("%d\t%d", len(acked), len(acked)))
	var got []int
	for f := range strings.FieldsSeq(ch.Query(t, "SELECT id FROM default.quota ORDER BY id")) {
		id, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("id %q: %v", f, err)
		}
		got = append(got, id)
	}
	if !slices.Equal(got, acked) {
		t.Fatalf("ids in ClickHouse differ from the %d acknowledged (%d rows)", len(acked), len(got))
	}
	if lines := logLines(t, p, "level=ERROR"); len(lines) != 0 {
		t.Errorf("ERROR lines: %q", lines)
	}
	t.Logf("rows landed %v after ClickHouse's restart; test %v", landed.Round(time.Millisecond), time.Since(started).Round(time.Millisecond))
}
