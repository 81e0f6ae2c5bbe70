//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"chute/internal/chtest"
	"chute/internal/faults"
	"chute/internal/testutil"
)

// Bounds of the partition scenario.
const (
	partitionPutTimeout = 7 * time.Second  // a key-space put on the minority
	partitionLast       = 8 * time.Second  // how long the minority stays cut off
	partitionSettle     = 90 * time.Second // the queue to reach ClickHouse after the heal
)

// Fixed ports: every node has a namespace, and so an address, of its own.
const (
	nsClientPort  = "2379"
	nsPeerPort    = "2380"
	nsGossipPort  = "7946"
	nsMetricsPort = "9379"
	nsCHPort      = "8123" // ClickHouse's proxy in the hub
)

// nsCluster is three chute nodes, each in a network namespace of its own
// (faults.Network), with ClickHouse offered to them through a proxy in
// the hub namespace. The test reaches each node's etcd API and metrics
// through proxies on the host's loopback (Proc.ClientAddr and
// MetricsAddr) that connect from inside the node's namespace, so an
// isolated node still answers the test.
type nsCluster struct {
	t     *testing.T
	net   *faults.Network
	chFwd *faults.Proxy // the nodes' ClickHouse, in the hub; nil without one
	nodes []*Proc
}

// newNSCluster creates the namespaces and starts a, b and c in them with
// --bootstrap-expect 3, each naming the other two as seeds, and ch as
// their ClickHouse (none when ch is nil). It fails the test, never skips
// it, when namespaces cannot be made.
func newNSCluster(t *testing.T, ch *chtest.Server) *nsCluster {
	t.Helper()
	ipBin, err := exec.LookPath("ip")
	if err != nil {
		t.Fatalf("e2e: partitions need iproute2's ip (apt-get install iproute2): %v", err)
	}
	c := newCluster(t)
	cfg := faults.DefaultNetworkConfig()
	cfg.Name = fmt.Sprintf("chute-e2e%d-%d", os.Getpid(), c.subnet)
	cfg.IP = ipBin
	network, err := faults.NewNetwork(cfg)
	if err != nil {
		t.Fatalf("e2e: the partition mechanism is unavailable (network namespaces need root, CAP_SYS_ADMIN and CAP_NET_ADMIN): %v", err)
	}
	// Registered first, so it runs last: after the nodes have stopped.
	t.Cleanup(func() {
		if err := network.Close(); err != nil {
			t.Errorf("e2e: %v", err)
		}
	})
	nc := &nsCluster{t: t, net: network}

	if ch != nil {
		ln, err := network.ListenHub("tcp", net.JoinHostPort(network.HubIP(), nsCHPort))
		if err != nil {
			t.Fatalf("e2e: ClickHouse's proxy in the hub: %v", err)
		}
		nc.chFwd = faults.NewProxyListener(ln, func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", ch.HTTPAddr())
		})
		t.Cleanup(func() { _ = nc.chFwd.Close() })
	}

	names := []string{"a", "b", "c"}
	for i, name := range names {
		ip := network.NodeIP(i)
		var seeds []string
		for j := range names {
			if j != i {
				seeds = append(seeds, net.JoinHostPort(network.NodeIP(j), nsGossipPort))
			}
		}
		args := []string{
			"--name", name,
			"--cluster", c.name,
			"--listen-client-urls", "http://" + net.JoinHostPort(ip, nsClientPort),
			"--listen-peer-urls", "http://" + net.JoinHostPort(ip, nsPeerPort),
			"--gossip-listen", net.JoinHostPort(ip, nsGossipPort),
			"--metrics-listen", net.JoinHostPort(ip, nsMetricsPort),
			"--gossip-profile", "fast",
			"--data-dir", t.TempDir(),
			"--join", strings.Join(seeds, ","),
			"--bootstrap-expect", "3",
		}
		if ch != nil {
			args = append(args, "--clickhouse-url", "http://"+net.JoinHostPort(network.HubIP(), nsCHPort), "--clickhouse-db", "default")
		}
		dataDir, _ := flagValue(args, "data-dir")
		bin, cmdArgs := network.Command(i, chuteBin, args...)
		p := &Proc{
			Kind:        "chute",
			Name:        name,
			ClientAddr:  nc.forward(i, nsClientPort),
			PeerAddr:    net.JoinHostPort(ip, nsPeerPort),
			GossipAddr:  net.JoinHostPort(ip, nsGossipPort),
			MetricsAddr: nc.forward(i, nsMetricsPort),
			DataDir:     dataDir,
			Args:        cmdArgs,
			bin:         bin,
		}
		p.ready = func() error {
			code, body, err := getReadyz(p)
			if err != nil {
				return err
			}
			if code != 200 {
				return fmt.Errorf("GET /readyz: %d %q", code, body)
			}
			return nil
		}
		if err := p.start(t); err != nil {
			t.Fatalf("e2e: start %s: %v", name, err)
		}
		nc.nodes = append(nc.nodes, p)
	}
	for _, p := range nc.nodes {
		if err := p.waitReady(readyTimeout); err != nil {
			t.Fatalf("e2e: start %s: %v", p.Name, err)
		}
	}
	return nc
}

// forward returns a loopback address of the host that reaches port of
// node i from inside its namespace.
func (nc *nsCluster) forward(i int, port string) string {
	nc.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		nc.t.Fatal(err)
	}
	target := net.JoinHostPort(nc.net.NodeIP(i), port)
	p := faults.NewProxyListener(ln, func(ctx context.Context) (net.Conn, error) {
		return nc.net.Dial(ctx, i, "tcp", target)
	})
	nc.t.Cleanup(func() { _ = p.Close() })
	return p.Addr()
}

// waitMemberNames polls the member list of node i until it names
// exactly want.
func (nc *nsCluster) waitMemberNames(i int, want ...string) time.Duration {
	nc.t.Helper()
	start := time.Now()
	cli := clusterClient(nc.t, nc.nodes[i].ClientAddr)
	testutil.Eventually(nc.t, membershipTimeout, fmt.Sprintf("member list of %s", nc.nodes[i].Name), func() error {
		got, err := memberNames(cli)
		if err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("got %q, want %q", got, want)
		}
		return nil
	})
	return time.Since(start)
}

// sinceLogf returns t.Logf with each line stamped with the seconds
// since t0.
func sinceLogf(t *testing.T, t0 time.Time) func(format string, args ...any) {
	return func(format string, args ...any) {
		t.Helper()
		t.Logf("+%.3fs "+format, append([]any{time.Since(t0).Seconds()}, args...)...)
	}
}

// insertWindow is when one node had an INSERT connection open to
// ClickHouse.
type insertWindow struct {
	node       string
	start, end time.Time
}

// TestPartition_minority cuts c off from a and b (all its TCP and UDP to
// them dropped, by network namespaces) while producers put to a
// ClickHouse queue on all three nodes. On c, a key-space put fails with
// etcd's error within the request timeout, while c's queue puts succeed
// as held copies. After the heal every acknowledged id is in ClickHouse
// exactly once, and no two nodes ever had an insert open at once.
func TestPartition_minority(t *testing.T) {
	t.Parallel()
	const table = "partition"
	queue := "ch:" + table
	ch, nc := workloadCluster(t, table)
	a, c := nc.nodes[0], nc.nodes[2]
	t0 := time.Now()
	logf := sinceLogf(t, t0)

	log := seedOn(t, a, queue) // a dispatches

	start := func(first int, nodes ...*Proc) *faults.Workload {
		cfg := faults.DefaultWorkloadConfig()
		cfg.Queue, cfg.Producers, cfg.FirstProducer = queue, 2*len(nodes), first
		cfg.Rate, cfg.PutTimeout, cfg.Duration = 20, faultPutTimeout, 2*time.Minute
		for _, p := range nodes {
			cfg.Endpoints = append(cfg.Endpoints, p.ClientAddr)
		}
		w, err := faults.StartWorkload(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Stop() })
		return w
	}
	majority := start(0, a, nc.nodes[1])
	minority := start(100, c)
	// A watch on c that asks for a leader (clientv3.WithRequireLeader,
	// as Kubernetes watches) must end with etcd's "no leader" once c is
	// cut off, so that its client can move to the majority.
	cliC := clusterClient(t, c.ClientAddr)
	wctx, stopWatch := context.WithCancel(clientv3.WithRequireLeader(context.Background()))
	defer stopWatch()
	wch := cliC.Watch(wctx, "/partition/", clientv3.WithPrefix())
	type watchEnd struct {
		err error
		at  time.Time
	}
	watchEnded := make(chan watchEnd, 1)
	go func() { // ends when wch closes: the server ends it, or stopWatch
		for resp := range wch {
			if err := resp.Err(); err != nil {
				watchEnded <- watchEnd{err, time.Now()}
				return
			}
		}
		watchEnded <- watchEnd{errors.New("closed without an error"), time.Now()}
	}()
	time.Sleep(2 * time.Second) // puts flow on all three before the cut

	cut := time.Now()
	if err := nc.net.Isolate(2); err != nil {
		t.Fatal(err)
	}
	logf("c isolated: its link to the bridge is down")
	took := nc.waitMemberNames(2, "c")
	logf("c's member list lost a and b %v after the cut", took.Round(time.Millisecond))
	detected := time.Now()

	// A key-space write on c: etcd's error within the request timeout.
	ctx, cancel := context.WithTimeout(context.Background(), partitionPutTimeout)
	putStart := time.Now()
	_, err := cliC.Put(ctx, "/partition/minority", "x")
	putTook := time.Since(putStart)
	cancel()
	logf("put on c: %v after %v", err, putTook.Round(time.Millisecond))
	switch {
	case err == nil:
		t.Errorf("put on isolated c: succeeded, want etcd's no-leader or timeout error")
	case !isEtcdUnavailable(err):
		t.Errorf("put on isolated c: got %v (%v), want etcdserver: no leader, request timed out or the deadline", err, grpcCode(err))
	case putTook > partitionPutTimeout+time.Second:
		t.Errorf("put on isolated c: failed after %v, want within %v", putTook, partitionPutTimeout)
	}
	cliA := clusterClient(t, a.ClientAddr)
	ctx, cancel = rpcCtx()
	_, err = cliA.Put(ctx, "/partition/majority", "x")
	cancel()
	if err != nil {
		t.Errorf("put on a, in the majority: %v, want it to succeed", err)
	}

	testutil.Eventually(t, partitionLast, "c to hold copies of its queue puts", func() error {
		q, _, err := queueOn(c, queue)
		if err != nil {
			return err
		}
		if q.Held == 0 {
			return fmt.Errorf("/status of c: %+v, want held_copies > 0", q)
		}
		return nil
	})
	if rest := partitionLast - time.Since(cut); rest > 0 {
		time.Sleep(rest) // the minority keeps taking puts
	}
	q, _, _ := queueOn(c, queue)
	logf("before the heal, c shows %+v", q)
	select {
	case end := <-watchEnded:
		logf("watch on c asking for a leader: %v, %v after the cut", end.err, end.at.Sub(cut).Round(time.Millisecond))
		if !errors.Is(end.err, rpctypes.ErrNoLeader) {
			t.Errorf("watch on isolated c asking for a leader: ended with %v, want %v", end.err, rpctypes.ErrNoLeader)
		}
	default:
		t.Errorf("watch on isolated c asking for a leader: still open %v after the cut, want %v", time.Since(cut).Round(time.Millisecond), rpctypes.ErrNoLeader)
	}
	healed := time.Now()
	if err := nc.net.Heal(2); err != nil {
		t.Fatal(err)
	}
	logf("c healed")
	for i := range nc.nodes {
		nc.waitMemberNames(i, "a", "b", "c")
	}
	logf("all three list each other again")
	time.Sleep(2 * time.Second) // puts flow on the healed cluster
	log = append(log, majority.Stop()...)
	minLog := minority.Stop()
	log = append(log, minLog...)
	logf("puts ended: majority %v, minority errors %v", majority.FirstErrors(), minority.FirstErrors())

	// c's puts sent once c knew itself alone, before the heal, must all
	// succeed: they are the held copies.
	var during, acked int
	var outcomes []string
	for _, o := range minLog {
		if o.Start.Before(cut.Add(-time.Second)) || o.Start.After(healed.Add(time.Second)) {
			continue
		}
		outcomes = append(outcomes, fmt.Sprintf("%d-%d %v sent +%.3fs took %v",
			o.Producer, o.ID&0xffffffff, o.Result, o.Start.Sub(t0).Seconds(), o.End.Sub(o.Start).Round(time.Millisecond)))
		if o.Start.Before(detected) || o.Start.After(healed) {
			continue
		}
		during++
		if o.Result == faults.Acked {
			acked++
		}
	}
	logf("c's puts around the partition:\n\t%s", strings.Join(outcomes, "\n\t"))
	logf("c's puts sent while it knew itself cut off: %d, %d acknowledged", during, acked)
	if during == 0 || acked != during {
		t.Errorf("queue puts on isolated c: %d of %d sent while cut off acknowledged, want all (and some)", acked, during)
	}

	v := judgeIDs(t, ch, table, log, partitionSettle)
	logf("oracle: %v", v)
	// A put c forwarded to the dispatcher as the cut came may have been
	// enqueued there with its answer lost; c then holds a copy too
	// (at least once, as after a freeze): at most one per producer on c.
	if err := v.Check(0, 2); err != nil {
		t.Error(err)
	}

	checkOneInserter(t, nc, t0)
}

// workloadCluster starts a ClickHouse server with the workload's table
// default.table (faults.StartWorkload's rows) and three nodes in
// namespaces that reach it through the hub, and waits until each lists
// all three.
func workloadCluster(t *testing.T, table string) (*chtest.Server, *nsCluster) {
	t.Helper()
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default."+table+" (id UInt64, p UInt32, n UInt64, pad String) ENGINE = MergeTree ORDER BY id")
	nc := newNSCluster(t, ch)
	for i := range nc.nodes {
		nc.waitMemberNames(i, "a", "b", "c")
	}
	return ch, nc
}

// seedOn puts one id to the ClickHouse queue through p, which makes p
// its dispatcher when nobody is, and returns the put's log.
func seedOn(t *testing.T, p *Proc, queue string) faults.Log {
	t.Helper()
	cfg := faults.DefaultWorkloadConfig()
	cfg.Queue, cfg.Endpoints = queue, []string{p.ClientAddr}
	cfg.Producers, cfg.FirstProducer, cfg.MaxPuts = 1, 1000, 1
	w, err := faults.StartWorkload(cfg)
	if err != nil {
		t.Fatal(err)
	}
	<-w.Done()
	log := w.Stop()
	if log.Count(faults.Acked) != 1 {
		t.Fatalf("the first put on %s: %+v: %v", p.Name, log, w.FirstErrors())
	}
	return log
}

// judgeIDs waits up to timeout for ClickHouse's table default.table to
// hold log's acknowledged ids, and judges what it holds against log.
func judgeIDs(t *testing.T, ch *chtest.Server, table string, log faults.Log, timeout time.Duration) faults.Verdict {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	found, err := faults.WaitIDs(ctx, ch.URL(), "default."+table, log.AckedIDs(), faults.WaitConfig{Quiet: faultQuiet, Poll: faultPoll})
	if err != nil {
		t.Fatal(err)
	}
	return faults.Judge(log, found)
}

// checkOneInserter checks that no two nodes of nc had an insert open at
// once. chute sends each batch on a connection of its own (Connection:
// close), and the nodes reach ClickHouse only through the hub's proxy,
// which recorded every connection with the node's address and its
// request line. A node inserts only while it dispatches the queue; two
// nodes that both believed they did would sooner or later have inserts
// open at the same time, which this finds. (Duplicate rows, which the
// oracle finds, are the other trace such a split would leave.)
func checkOneInserter(t *testing.T, nc *nsCluster, since time.Time) {
	t.Helper()
	byIP := map[string]string{}
	for i, p := range nc.nodes {
		byIP[nc.net.NodeIP(i)] = p.Name
	}
	var windows []insertWindow
	perNode := map[string]int{}
	for _, r := range nc.chFwd.Records() {
		if !strings.Contains(r.Head, "INSERT") {
			continue
		}
		host, _, _ := net.SplitHostPort(r.Remote)
		windows = append(windows, insertWindow{node: byIP[host], start: r.Start, end: r.End})
		perNode[byIP[host]]++
	}
	t.Logf("inserts by node: %v", perNode)
	slices.SortFunc(windows, func(x, y insertWindow) int { return x.start.Compare(y.start) })
	open := map[string]insertWindow{} // each node's insert that ends last, of those started so far
	for _, w := range windows {
		for node, o := range open {
			if node != w.node && o.end.After(w.start) {
				t.Errorf("%s and %s inserted at once: %s's insert open +%.3fs..+%.3fs, %s's from +%.3fs",
					node, w.node, node, o.start.Sub(since).Seconds(), o.end.Sub(since).Seconds(), w.node, w.start.Sub(since).Seconds())
			}
		}
		if o, ok := open[w.node]; !ok || w.end.After(o.end) {
			open[w.node] = w
		}
	}
}

// isEtcdUnavailable reports whether err is etcd's answer to a write that
// found no quorum: no leader, a timeout, or the client's deadline.
func isEtcdUnavailable(err error) bool {
	for _, want := range []error{rpctypes.ErrNoLeader, rpctypes.ErrTimeout, rpctypes.ErrTimeoutDueToLeaderFail, rpctypes.ErrTimeoutDueToConnectionLost, rpctypes.ErrLeaderChanged} {
		if errors.Is(rpctypes.Error(err), want) || strings.Contains(err.Error(), want.Error()) {
			return true
		}
	}
	return errors.Is(err, context.DeadlineExceeded)
}
