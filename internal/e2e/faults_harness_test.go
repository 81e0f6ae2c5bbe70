//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"chute/dispatch"
	"chute/internal/chtest"
	"chute/internal/faults"
	"chute/internal/nodeprobe"
	"chute/internal/testutil"
)

// Fault tests run three chute processes with --gossip-profile
// fast, a private ClickHouse, producers that put unique ids through
// clientv3 and record every put's outcome (internal/faults), and faults:
// SIGKILL and SIGSTOP of the dispatcher, SIGKILL of every node (on the
// same data dirs, or with one deleted), SIGTERM of each node in turn,
// ClickHouse slowed (a proxy) and killed. Then the oracle compares the
// outcomes with the ids in ClickHouse, or with what consumers of a plain
// queue received.
//
// Each scenario has a short form, run by make test (a few faults, seconds
// long, in parallel with the other tests), and the acceptance's full form
// with CHUTE_FAULTS=full (make test-faults: 20 kills, a 30 s freeze, a 60 s
// outage; one scenario at a time, so the figures measure chute rather
// than the machine's load), which writes its figures to
// docs/reliability.md. CHUTE_FAULTS_REPORT=path writes the figures of any
// form to path instead. CHUTE_FAULTS_SEED=n fixes the random kill points;
// every test logs its seed.

// Bounds of the fault tests' waits. Each is polled, never slept through.
// settle's waits have a bound each, so that a slow one leaves the next
// its whole time.
const (
	faultSettleTimeout = 120 * time.Second // the backlog to reach ClickHouse after the last fault (ClickHouse's retry backoff reaches 30 s)
	faultBackupTimeout = 90 * time.Second  // backup copies to go once the queue drained (a stale backup is dropped after a minute)
	faultCountTimeout  = 30 * time.Second  // ClickHouse to show the acknowledged ids, faultQuiet included
	faultQuiet         = 2 * time.Second   // a table unchanged this long holds all it will
	faultPoll          = 50 * time.Millisecond
	faultPutTimeout    = 5 * time.Second // one put of a producer
	faultRecordTimeout = 20 * time.Second
)

// faultTable is the table every scenario creates in its own ClickHouse.
const faultTable = "faults"

// faultsFull reports whether CHUTE_FAULTS=full asks for the full form.
func faultsFull() bool { return os.Getenv("CHUTE_FAULTS") == "full" }

// faultsMode names the form for reports.
func faultsMode() string {
	if faultsFull() {
		return "full"
	}
	return "short"
}

// faultsParallel runs the short form in parallel with the other tests; the
// full form runs one scenario at a time.
func faultsParallel(t *testing.T) {
	if !faultsFull() {
		t.Parallel()
	}
}

// pick returns short or full by the form.
func pick[T any](short, full T) T {
	if faultsFull() {
		return full
	}
	return short
}

// faultRand returns the scenario's random source, seeded from
// CHUTE_FAULTS_SEED or the clock, and logs the seed.
func faultRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CHUTE_FAULTS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CHUTE_FAULTS_SEED=%q: %v", s, err)
		}
		seed = n
	}
	t.Logf("random kill points from CHUTE_FAULTS_SEED=%d", seed)
	return rand.New(rand.NewPCG(seed, seed>>1|1))
}

// between returns a random duration in [lo, hi).
func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.Int64N(int64(hi-lo)))
}

// pid is the process id of p's current run.
func (p *Proc) pid() int { return p.cmd.Process.Pid }

// faultRig is one scenario's ClickHouse, optional proxy and three nodes
// that all name each other as seeds, so any of them can restart alone.
type faultRig struct {
	t     *testing.T
	ch    *chtest.Server
	proxy *faults.Proxy // nil unless asked for
	nodes []*Proc
	clis  []*clientv3.Client // one per node, by index
	byID  map[uint64]int     // member id -> node index
	queue string             // ch:faults
	table string             // default.faults
	chURL string             // what the nodes insert into: ClickHouse or the proxy
	rng   *rand.Rand
	t0    time.Time // when the rig started: log lines and id summaries count from it
}

// rigOptions configures newFaultRig.
type rigOptions struct {
	proxy    bool                  // put a faults.Proxy between the nodes and ClickHouse
	settings *faults.QueueSettings // written to /config/queues/ch:faults before any put; nil: none
}

// newFaultRig starts ClickHouse with the table, the proxy if asked, three
// nodes a, b and c, and writes the queue's settings, waiting until every
// node holds them.
func newFaultRig(t *testing.T, o rigOptions) *faultRig {
	t.Helper()
	r := &faultRig{t: t, queue: "ch:" + faultTable, table: "default." + faultTable, rng: faultRand(t), t0: time.Now()}
	r.ch = chtest.Start(t)
	r.ch.Exec(t, "CREATE TABLE "+r.table+" (id UInt64, p UInt32, n UInt64, pad String) ENGINE = MergeTree ORDER BY id")
	r.chURL = r.ch.URL()
	if o.proxy {
		p, err := faults.NewProxy(r.ch.HTTPAddr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		r.proxy, r.chURL = p, p.URL()
	}
	c := newCluster(t)
	plans := []nodePlan{c.plan("a"), c.plan("b"), c.plan("c")}
	for i, pl := range plans {
		var seeds []string
		for j, other := range plans {
			if j != i {
				seeds = append(seeds, other.GossipAddr)
			}
		}
		args := []string{"--join", strings.Join(seeds, ","), "--clickhouse-url", r.chURL, "--clickhouse-db", "default"}
		if i == 0 {
			// Its seeds start after it: it only serves until they do.
			r.nodes = append(r.nodes, c.startServing(pl, args...))
			continue
		}
		r.nodes = append(r.nodes, c.start(pl, args...))
	}
	waitMembers(t, r.nodes, r.nodes)
	r.clis = clientsOf(t, r.nodes...)
	r.byID = make(map[uint64]int)
	for i, p := range r.nodes {
		r.byID[memberID(t, p)] = i
	}
	if o.settings != nil {
		r.setSettings(*o.settings)
	}
	return r
}

// setSettings writes the queue's settings key on a and waits until every
// node holds the value.
func (r *faultRig) setSettings(s faults.QueueSettings) {
	r.t.Helper()
	r.setSettingsOf(r.queue, s)
}

// setSettingsOf is setSettings for the queue called name.
func (r *faultRig) setSettingsOf(name string, s faults.QueueSettings) {
	r.t.Helper()
	key, val := faults.SettingsKey(name), s.JSON()
	ctx, cancel := rpcCtx()
	_, err := r.clis[0].Put(ctx, key, val)
	cancel()
	if err != nil {
		r.t.Fatalf("put %s %s: %v (%v)", key, val, err, grpcCode(err))
	}
	for i, cli := range r.clis {
		testutil.Eventually(r.t, convergeTimeout, fmt.Sprintf("%s on %s", key, r.nodes[i].Name), func() error {
			ctx, cancel := rpcCtx()
			defer cancel()
			resp, err := cli.Get(ctx, key)
			if err != nil {
				return err
			}
			if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != val {
				return fmt.Errorf("got %v", resp.Kvs)
			}
			return nil
		})
	}
	r.logf("settings %s = %s", key, val)
}

// logf logs what the scenario does, after the time since the rig
// started.
func (r *faultRig) logf(format string, args ...any) {
	r.t.Helper()
	r.t.Logf("%s "+format, append([]any{r.since(time.Now())}, args...)...)
}

// since is at's time since the rig started, as "+1.234s".
func (r *faultRig) since(at time.Time) string {
	return fmt.Sprintf("+%.3fs", at.Sub(r.t0).Seconds())
}

// describeIDs summarizes ids of log by producer: how many, the range of
// their numbers and when their puts were sent and answered.
func (r *faultRig) describeIDs(log faults.Log, ids []uint64) string {
	if len(ids) == 0 {
		return "none"
	}
	type span struct {
		n                  int
		lo, hi             uint64
		sentLo, answeredHi time.Time
	}
	want := make(map[uint64]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	spans := make(map[int]*span)
	for _, o := range log {
		if !want[o.ID] {
			continue
		}
		_, n := faults.SplitID(o.ID)
		sp := spans[o.Producer]
		if sp == nil {
			sp = &span{lo: n, hi: n, sentLo: o.Start, answeredHi: o.End}
			spans[o.Producer] = sp
		}
		sp.n++
		sp.lo, sp.hi = min(sp.lo, n), max(sp.hi, n)
		if o.Start.Before(sp.sentLo) {
			sp.sentLo = o.Start
		}
		if o.End.After(sp.answeredHi) {
			sp.answeredHi = o.End
		}
	}
	var parts []string
	for _, p := range slices.Sorted(maps.Keys(spans)) {
		sp := spans[p]
		parts = append(parts, fmt.Sprintf("producer %d: %d ids of %d-%d..%d-%d, sent from %s, answered until %s",
			p, sp.n, p, sp.lo, p, sp.hi, r.since(sp.sentLo), r.since(sp.answeredHi)))
	}
	return strings.Join(parts, "; ")
}

// endpoints returns the client addresses of the nodes with the indexes.
func (r *faultRig) endpoints(idx ...int) []string {
	var eps []string
	for _, i := range idx {
		eps = append(eps, r.nodes[i].ClientAddr)
	}
	return eps
}

// workload starts producers on the nodes with the indexes (producer i on
// the i-th of them, round robin); the test's cleanup stops them.
func (r *faultRig) workload(cfg faults.WorkloadConfig, idx ...int) *faults.Workload {
	r.t.Helper()
	cfg.Queue = r.queue
	cfg.Endpoints = r.endpoints(idx...)
	if cfg.PutTimeout == 0 {
		cfg.PutTimeout = faultPutTimeout
	}
	if cfg.Duration == 0 && cfg.MaxPuts == 0 {
		cfg.Duration = 30 * time.Minute // a bound; tests Stop it long before
	}
	w, err := faults.StartWorkload(cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { w.Stop() })
	return w
}

// seed makes node i the queue's dispatcher: one put there claims the
// queue. It returns the put's log, to add to the scenario's.
func (r *faultRig) seed(i int) faults.Log {
	r.t.Helper()
	cfg := faults.DefaultWorkloadConfig()
	cfg.Producers, cfg.FirstProducer, cfg.MaxPuts = 1, 1000, 1
	w := r.workload(cfg, i)
	<-w.Done()
	log := w.Stop()
	if log.Count(faults.Acked) != 1 {
		r.t.Fatalf("the first put on %s: %+v: %v", r.nodes[i].Name, log, w.FirstErrors())
	}
	rec := r.waitRecord(r.alive(), func(rec queueRecord) error {
		if got, ok := r.byID[rec.member]; !ok || got != i {
			return fmt.Errorf("record %q, want %s", rec.raw, r.nodes[i].Name)
		}
		return nil
	})
	r.logf("%s dispatches %s: %q", r.nodes[i].Name, r.queue, rec.raw)
	return log
}

// alive returns the indexes of the nodes whose process runs.
func (r *faultRig) alive() []int {
	var idx []int
	for i, p := range r.nodes {
		select {
		case <-p.Done():
		default:
			idx = append(idx, i)
		}
	}
	return idx
}

// record reads the dispatcher record on node i.
func (r *faultRig) record(i int) (queueRecord, error) {
	return r.recordOf(i, r.queue)
}

// recordOf is record for the queue called name.
func (r *faultRig) recordOf(i int, name string) (queueRecord, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := r.clis[i].Get(ctx, "/q/"+name)
	if err != nil {
		return queueRecord{}, fmt.Errorf("%s: %w", r.nodes[i].Name, err)
	}
	if len(resp.Kvs) == 0 {
		return queueRecord{}, fmt.Errorf("%s: no record", r.nodes[i].Name)
	}
	return parseRecord(string(resp.Kvs[0].Value))
}

// waitRecord polls the record on the nodes with the indexes until all
// show the same one and check accepts it, and returns it.
func (r *faultRig) waitRecord(idx []int, check func(queueRecord) error) queueRecord {
	r.t.Helper()
	var got queueRecord
	testutil.Eventually(r.t, faultRecordTimeout, fmt.Sprintf("one dispatcher record of %s on %d nodes", r.queue, len(idx)), func() error {
		var seen []string
		for k, i := range idx {
			rec, err := r.record(i)
			if err != nil {
				return err
			}
			seen = append(seen, r.nodes[i].Name+": "+rec.raw)
			if k == 0 {
				got = rec
			} else if rec.raw != got.raw {
				return fmt.Errorf("records differ: %s", strings.Join(seen, ", "))
			}
		}
		if check != nil {
			return check(got)
		}
		return nil
	})
	return got
}

// dispatcher returns the index of the node the alive nodes agree
// dispatches the queue, and the record.
func (r *faultRig) dispatcher() (int, queueRecord) {
	r.t.Helper()
	rec := r.waitRecord(r.alive(), func(rec queueRecord) error {
		if _, ok := r.byID[rec.member]; !ok {
			return fmt.Errorf("record %q names no node of the test", rec.raw)
		}
		return nil
	})
	return r.byID[rec.member], rec
}

// waitMoved waits until the alive nodes agree on a record of a later
// epoch than old that names an alive node, which the producers' next puts
// elect, and returns that node's index.
func (r *faultRig) waitMoved(old queueRecord) (int, queueRecord) {
	r.t.Helper()
	alive := r.alive()
	rec := r.waitRecord(alive, func(rec queueRecord) error {
		i, ok := r.byID[rec.member]
		if !ok || rec.epoch <= old.epoch {
			return fmt.Errorf("record %q, want a later epoch than %q", rec.raw, old.raw)
		}
		for _, a := range alive {
			if a == i {
				return nil
			}
		}
		return fmt.Errorf("record %q names %s, which is down", rec.raw, r.nodes[i].Name)
	})
	return r.byID[rec.member], rec
}

// restart starts node i again (empty memory, same name, ports and seeds)
// and waits until all three list each other.
func (r *faultRig) restart(i int) {
	r.t.Helper()
	r.nodes[i].Restart(r.t)
	waitMembers(r.t, r.nodes, r.nodes)
}

// depth returns what node i's /status shows of the queue.
func (r *faultRig) depth(i int) (dispatch.QueueStatus, error) {
	q, _, err := r.holds(i)
	return q, err
}

// holds returns what node i's /status shows of the queue, and the rows it
// keeps as another member's backup.
func (r *faultRig) holds(i int) (dispatch.QueueStatus, int, error) {
	return r.holdsOf(i, r.queue)
}

// holdsOf is holds for the queue called name.
func (r *faultRig) holdsOf(i int, name string) (dispatch.QueueStatus, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	st, err := nodeprobe.Status(ctx, nil, r.nodes[i].MetricsAddr)
	if err != nil {
		return dispatch.QueueStatus{}, 0, err
	}
	q, _ := nodeprobe.Queue(st, name)
	backup, _ := nodeprobe.Backup(st, name)
	return q, backup, nil
}

// settle waits until no alive node holds rows of the queue (queued or
// held for an election) and ClickHouse holds every acknowledged id (or has
// not changed for faultQuiet): how long that took is the drain. Then it
// waits until no node keeps backup copies of the queue either (a backup
// of a dispatcher that came back under its name is dropped after a
// minute), counts the ids again, in case the copies were inserted, and
// judges log. It returns the verdict, the drain and the largest insert
// (rows of one batch) ClickHouse saw. A queue that does not drain fails
// the test, after the judgement is logged. Each wait has its own bound:
// a drain that takes all of its time still leaves the count in
// ClickHouse its own.
func (r *faultRig) settle(log faults.Log) (faults.Verdict, time.Duration, int) {
	r.t.Helper()
	start := time.Now()
	drainErr := r.waitEmpty(false, faultSettleTimeout)
	acked := log.AckedIDs()
	found := r.countIDs(acked, drainErr)
	drain := time.Since(start)
	if backups := r.backupRows(); backups > 0 {
		drainErr = errors.Join(drainErr, r.waitEmpty(true, faultBackupTimeout))
		found = r.countIDs(acked, drainErr)
		r.logf("%d backup copies were kept when the queue had drained; all gone %v later", backups, (time.Since(start) - drain).Round(time.Millisecond))
	}
	qctx, qcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer qcancel()
	batch, err := faults.MaxInsertRows(qctx, r.ch.URL(), "default", faultTable)
	if err != nil {
		if drainErr != nil {
			r.t.Error(drainErr)
		}
		r.t.Fatal(err)
	}
	v := faults.Judge(log, found)
	r.logf("oracle: %v; largest insert %d rows; drained %v after the puts ended", v, batch, drain.Round(time.Millisecond))
	if len(v.Lost) > 0 {
		r.logf("lost: %s", r.describeIDs(log, v.Lost))
	}
	if len(v.Duplicated) > 0 {
		r.logf("inserted more than once: %s", r.describeIDs(log, v.Duplicated))
	}
	if drainErr != nil {
		r.t.Error(drainErr)
	}
	return v, drain, batch
}

// waitEmpty polls every alive node's /status until it holds no rows of
// the queue, and, withBackups, no backup copies either, for at most
// timeout; it returns what did not empty.
func (r *faultRig) waitEmpty(withBackups bool, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var errs error
	for _, i := range r.alive() {
		for {
			q, backup, err := r.holds(i)
			if err == nil && q.Rows == 0 && q.Held == 0 && q.Bytes == 0 && (!withBackups || backup == 0) {
				break
			}
			if time.Now().After(deadline) {
				what := "queue %s not drained"
				if withBackups {
					what = "backup copies of %s not gone"
				}
				errs = errors.Join(errs, fmt.Errorf("%s: "+what+" within %v: %+v, %d backup rows, %v",
					r.nodes[i].Name, r.queue, timeout, q, backup, err))
				break
			}
			time.Sleep(faultPoll)
		}
	}
	return errs
}

// countIDs returns the acknowledged ids ClickHouse holds, waiting for them
// (faults.WaitIDs) at most faultCountTimeout. When no count could be read
// it fails the test, after drainErr, which may say why.
func (r *faultRig) countIDs(acked []uint64, drainErr error) map[uint64]int {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), faultCountTimeout)
	defer cancel()
	found, err := faults.WaitIDs(ctx, r.ch.URL(), r.table, acked, faults.WaitConfig{Quiet: faultQuiet, Poll: faultPoll})
	if err != nil {
		if drainErr != nil {
			r.t.Error(drainErr)
		}
		r.t.Fatal(err)
	}
	return found
}

// backupRows sums the backup copies of the queue the alive nodes keep.
func (r *faultRig) backupRows() int {
	n := 0
	for _, i := range r.alive() {
		if _, backup, err := r.holds(i); err == nil {
			n += backup
		}
	}
	return n
}

// report logs a scenario's figures and writes them to the report when the
// full form runs (docs/reliability.md) or CHUTE_FAULTS_REPORT names a
// file.
func report(t *testing.T, f faults.Figures) {
	t.Helper()
	f.Mode = faultsMode()
	f.Date = time.Now()
	t.Logf("figures: %+v", f)
	path := os.Getenv("CHUTE_FAULTS_REPORT")
	if path == "" && faultsFull() {
		root, err := moduleRoot()
		if err != nil {
			t.Fatalf("report: %v", err)
		}
		path = filepath.Join(root, "docs", "reliability.md")
	}
	if path == "" {
		return
	}
	if err := faults.WriteReport(path, f); err != nil {
		t.Errorf("report: %v", err)
	}
}

// moduleRoot is the directory of go.mod above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// codesOf describes the failed puts of log by gRPC code.
func codesOf(log faults.Log) string {
	m := log.Codes()
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for c, n := range m {
		parts = append(parts, fmt.Sprintf("%v %d", c, n))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// waitFlowing waits until the workload has n puts acknowledged and
// ClickHouse holds rows of them.
func (r *faultRig) waitFlowing(w *faults.Workload, n int) {
	r.t.Helper()
	testutil.Eventually(r.t, rowsTimeout, fmt.Sprintf("%d puts acknowledged and rows in ClickHouse", n), func() error {
		acked, failed, timedOut := w.Counts()
		if acked < n {
			return fmt.Errorf("%d acked, %d failed, %d timed out: %v", acked, failed, timedOut, w.FirstErrors())
		}
		if rows := r.ch.Count(r.t, r.table); rows == 0 {
			return errors.New("no rows in ClickHouse")
		}
		return nil
	})
}

// kill is one kill -9 of the dispatcher.
type kill struct {
	node    string
	sampled time.Time // when the /status read before the kill began
	depth   int       // depth_rows of the dispatcher's /status then
	bytes   int64     // depth_bytes then
	killed  time.Time // when the process was gone
	moved   time.Duration
	next    string // the dispatcher elected next
}

// killDispatchers kills the queue's dispatcher n times with SIGKILL, each
// time at a random point (after a random stretch of load in [lo, hi)),
// right after reading its /status; it waits until the producers' puts
// elect another node, then restarts the killed one with empty memory.
func (r *faultRig) killDispatchers(n int, lo, hi time.Duration) []kill {
	r.t.Helper()
	var kills []kill
	for k := range n {
		time.Sleep(between(r.rng, lo, hi)) // the load between two kills: a schedule, not a wait for a condition
		i, rec := r.dispatcher()
		p := r.nodes[i]
		kl := kill{node: p.Name, sampled: time.Now()}
		q, err := r.depth(i)
		if err != nil {
			r.t.Fatalf("/status of the dispatcher %s: %v", p.Name, err)
		}
		kl.depth, kl.bytes = q.Rows, q.Bytes
		p.Kill()
		kl.killed = time.Now()
		j, next := r.waitMoved(rec)
		kl.moved, kl.next = time.Since(kl.killed), r.nodes[j].Name
		r.logf("kill %d/%d: kill -9 at %s of the dispatcher %s (%q) with depth_rows %d, depth_bytes %d; %s dispatches (%q) %v later",
			k+1, n, r.since(kl.killed), p.Name, rec.raw, kl.depth, kl.bytes, kl.next, next.raw, kl.moved.Round(time.Millisecond))
		r.restart(i)
		kills = append(kills, kl)
		r.logf("kill %d/%d: %s restarted; queue: %s", k+1, n, p.Name, r.queueLine())
	}
	return kills
}

// killAll kills every node with SIGKILL at once, then restarts them all.
func (r *faultRig) killAll() {
	r.t.Helper()
	for _, p := range r.nodes {
		p.markSignaled()
		_ = p.cmd.Process.Kill() // fails only if it already exited
	}
	for _, p := range r.nodes {
		<-p.Done()
	}
	r.logf("kill -9 of all three nodes at once")
	for _, p := range r.nodes {
		p.Restart(r.t)
	}
	waitMembers(r.t, r.nodes, r.nodes)
}

// queueLine describes the queue on every alive node, for the log: the
// dispatcher it knows and the epoch, the rows it dispatches, the copies it
// holds for an election and those it keeps as a backup.
func (r *faultRig) queueLine() string {
	var parts []string
	for _, i := range r.alive() {
		q, backup, err := r.holds(i)
		if err != nil {
			parts = append(parts, fmt.Sprintf("%s: %v", r.nodes[i].Name, err))
			continue
		}
		d := "?"
		if id, err := strconv.ParseUint(q.Dispatcher, 16, 64); err == nil {
			if j, ok := r.byID[id]; ok {
				d = r.nodes[j].Name
			}
		}
		parts = append(parts, fmt.Sprintf("%s: %s@%d rows %d held %d backup %d", r.nodes[i].Name, d, q.Epoch, q.Rows, q.Held, backup))
	}
	return strings.Join(parts, ", ")
}
