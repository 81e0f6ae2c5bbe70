//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"chute/internal/testutil"
)

// Cluster tests run several chute processes of one cluster. Each test takes
// a /24 of loopback of its own, 127.0.<n>.0, and gives every node one
// address of it, so that nodes of different tests never meet and a log
// line's address names its node. Nodes run serf's fast timings (--gossip-profile fast).

// Bounds of the cluster tests' waits. Each is polled, never slept through.
const (
	membershipTimeout = 10 * time.Second // nodes to see each other, or a dead one gone
	convergeTimeout   = 20 * time.Second // every node to hold the same data
	rpcTimeout        = 5 * time.Second  // one clientv3 call
	clusterPoll       = 10 * time.Millisecond
)

// firstSubnet is the third octet of the first test's addresses; those below
// are left to tests that bind 127.0.0.x.
const firstSubnet = 20

// subnets hands out third octets, one per cluster.
var subnets atomic.Int32

// cluster is the nodes of one test, on 127.0.<subnet>.x.
type cluster struct {
	t      *testing.T
	subnet int
	name   string   // --cluster
	hosts  int      // addresses handed out so far
	env    []string // added to every node's environment
}

// newCluster returns an empty cluster named after the test, on a subnet of
// its own.
func newCluster(t *testing.T) *cluster {
	t.Helper()
	// Wrapping around (after -count=N) reuses the subnet of a test long
	// gone; ports stay unique anyway.
	n := firstSubnet + (int(subnets.Add(1))-1)%(256-firstSubnet)
	name := strings.ToLower(strings.TrimPrefix(t.Name(), "TestCluster_"))
	return &cluster{t: t, subnet: n, name: "e2e-" + name}
}

// nodePlan is where a node will listen. A test plans a node before it
// starts it when another node must name it as a seed first.
type nodePlan struct {
	Name        string
	Host        string // 127.0.<subnet>.x
	ClientAddr  string
	PeerAddr    string
	GossipAddr  string
	MetricsAddr string
}

// plan gives the node name the next address of the subnet and free ports
// on it.
func (c *cluster) plan(name string) nodePlan {
	c.t.Helper()
	c.hosts++
	if c.hosts > 254 {
		c.t.Fatal("e2e: out of addresses in the subnet")
	}
	host := fmt.Sprintf("127.0.%d.%d", c.subnet, c.hosts)
	addr := func(udp bool) string {
		return net.JoinHostPort(host, strconv.Itoa(testutil.FreePortOn(c.t, host, udp)))
	}
	return nodePlan{
		Name:        name,
		Host:        host,
		ClientAddr:  addr(false),
		PeerAddr:    addr(false),
		GossipAddr:  addr(true),
		MetricsAddr: addr(false),
	}
}

// args is the command line of a node of c at pl: name, cluster, listeners
// and the fast gossip profile; a flag given in extra replaces the planned
// one.
func (c *cluster) args(pl nodePlan, extra ...string) []string {
	planned := []string{
		"name", pl.Name,
		"cluster", c.name,
		"listen-client-urls", "http://" + pl.ClientAddr,
		"listen-peer-urls", "http://" + pl.PeerAddr,
		"gossip-listen", pl.GossipAddr,
		"metrics-listen", pl.MetricsAddr,
		"gossip-profile", "fast",
	}
	var args []string
	for i := 0; i < len(planned); i += 2 {
		if _, ok := flagValue(extra, planned[i]); !ok {
			args = append(args, "--"+planned[i], planned[i+1])
		}
	}
	return append(args, extra...)
}

// start starts the node planned as pl, with extra flags such as --join.
func (c *cluster) start(pl nodePlan, extra ...string) *Proc {
	c.t.Helper()
	return StartChuteEnv(c.t, c.env, c.args(pl, extra...)...)
}

// startNode plans and starts a node.
func (c *cluster) startNode(name string, extra ...string) *Proc {
	c.t.Helper()
	return c.start(c.plan(name), extra...)
}

// startThree starts a, b and c; b and c join a.
func (c *cluster) startThree(extra ...string) (a, b, cc *Proc) {
	c.t.Helper()
	a = c.startNode("a", extra...)
	b = c.startNode("b", append([]string{"--join", a.GossipAddr}, extra...)...)
	cc = c.startNode("c", append([]string{"--join", a.GossipAddr}, extra...)...)
	waitMembers(c.t, []*Proc{a, b, cc}, []*Proc{a, b, cc})
	return a, b, cc
}

// clusterClient returns a clientv3 client of endpoints, closed when the
// test ends.
func clusterClient(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("clientv3 %v: %v", endpoints, err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// clientsOf returns one single-endpoint client per node.
func clientsOf(t testing.TB, nodes ...*Proc) []*clientv3.Client {
	t.Helper()
	clis := make([]*clientv3.Client, len(nodes))
	for i, p := range nodes {
		clis[i] = clusterClient(t, p.ClientAddr)
	}
	return clis
}

// rpcCtx is a context for one clientv3 call.
func rpcCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), rpcTimeout)
}

// memberNames returns the sorted names of cli's MemberList.
func memberNames(cli *clientv3.Client) ([]string, error) {
	ctx, cancel := rpcCtx()
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(resp.Members))
	for i, m := range resp.Members {
		names[i] = m.Name
	}
	sort.Strings(names)
	return names, nil
}

// ctlMembers runs `etcdctl member list` against endpoints (a comma list)
// and returns each member's name and client URLs as "name clientURLs",
// sorted.
func ctlMembers(etcdctl, endpoints string) ([]string, error) {
	res, err := runEtcdctl(etcdctl, endpoints, "", "member", "list")
	if err != nil {
		return nil, err
	}
	if res.Code != 0 {
		return nil, fmt.Errorf("etcdctl member list on %s: exit %d: %s", endpoints, res.Code, res.Stderr)
	}
	var got []string
	for line := range strings.Lines(res.Stdout) {
		// id, status, name, peer URLs, client URLs, is learner
		f := strings.Split(strings.TrimSpace(line), ", ")
		if len(f) != 6 {
			return nil, fmt.Errorf("etcdctl member list on %s: line %q: want 6 fields", endpoints, line)
		}
		got = append(got, f[2]+" "+f[4])
	}
	sort.Strings(got)
	return got, nil
}

// memberLines is what ctlMembers returns for exactly the members want.
func memberLines(want []*Proc) []string {
	lines := make([]string, len(want))
	for i, p := range want {
		lines[i] = p.Name + " " + p.ClientURL()
	}
	sort.Strings(lines)
	return lines
}

// waitMembers polls `etcdctl member list` on every node of on until each
// shows exactly the members want, with their client URLs.
func waitMembers(t testing.TB, on, want []*Proc) {
	t.Helper()
	etcdctl := lookTool(t, "etcdctl")
	wantLines := memberLines(want)
	for _, p := range on {
		testutil.Eventually(t, membershipTimeout, fmt.Sprintf("member list of %s", p.Name), func() error {
			got, err := ctlMembers(etcdctl, p.ClientAddr)
			if err != nil {
				return err
			}
			if !slices.Equal(got, wantLines) {
				return fmt.Errorf("got %q, want %q", got, wantLines)
			}
			return nil
		})
	}
}

// dump returns every key and value cli's node holds.
func dump(cli *clientv3.Client) (map[string]string, error) {
	ctx, cancel := rpcCtx()
	defer cancel()
	resp, err := cli.Get(ctx, "", clientv3.WithFromKey())
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		m[string(kv.Key)] = string(kv.Value)
	}
	return m, nil
}

// dumpDiff describes how got differs from want: counts and the first few
// keys that differ.
func dumpDiff(want, got map[string]string) string {
	var diffs []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if v, ok := got[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%q missing (want %q)", k, want[k]))
		} else if v != want[k] {
			diffs = append(diffs, fmt.Sprintf("%q = %q, want %q", k, v, want[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%q = %q, want none", k, got[k]))
		}
	}
	if len(diffs) == 0 {
		return ""
	}
	const show = 5
	more := ""
	if len(diffs) > show {
		more = fmt.Sprintf(" and %d more", len(diffs)-show)
		diffs = diffs[:show]
	}
	return fmt.Sprintf("%d keys, want %d: %s%s", len(got), len(want), strings.Join(diffs, "; "), more)
}

// sameData reports nil when every node holds the same keys and values as
// the first and, when want is not nil, exactly want.
func sameData(nodes []*Proc, clis []*clientv3.Client, want map[string]string) error {
	dumps := make([]map[string]string, len(clis))
	for i, cli := range clis {
		d, err := dump(cli)
		if err != nil {
			return fmt.Errorf("%s: get all: %w", nodes[i].Name, err)
		}
		dumps[i] = d
	}
	if want == nil {
		want = dumps[0]
	}
	var errs []error
	for i, d := range dumps {
		if diff := dumpDiff(want, d); diff != "" {
			errs = append(errs, fmt.Errorf("%s: %s", nodes[i].Name, diff))
		}
	}
	return errors.Join(errs...)
}

// hashKVs returns each node's HashKV at its current revision.
func hashKVs(clis []*clientv3.Client, nodes []*Proc) ([]uint32, error) {
	hashes := make([]uint32, len(clis))
	for i, cli := range clis {
		ctx, cancel := rpcCtx()
		resp, err := cli.HashKV(ctx, nodes[i].ClientAddr, 0)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%s: hashkv: %w", nodes[i].Name, err)
		}
		hashes[i] = resp.Hash
	}
	return hashes, nil
}

// waitConverged polls until every node holds the same data (want, when
// not nil) with equal HashKV, and returns how long that took.
func waitConverged(t testing.TB, nodes []*Proc, clis []*clientv3.Client, want map[string]string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		err := sameData(nodes, clis, want)
		if err == nil {
			var hashes []uint32
			if hashes, err = hashKVs(clis, nodes); err == nil {
				for i := range hashes {
					if hashes[i] != hashes[0] {
						err = fmt.Errorf("hashkv %v differ though the data is the same", hashes)
					}
				}
			}
		}
		if err == nil {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("e2e: nodes not converged within %v: %v", timeout, err)
		}
		time.Sleep(clusterPoll)
	}
}

// requireCtlHashKV runs `etcdctl endpoint hashkv` on all nodes at once and
// requires one hash.
func requireCtlHashKV(t testing.TB, nodes []*Proc) {
	t.Helper()
	res, err := runEtcdctl(lookTool(t, "etcdctl"), endpointsOf(nodes), "", "endpoint", "hashkv")
	if err != nil || res.Code != 0 {
		t.Fatalf("etcdctl endpoint hashkv: %v %+v", err, res)
	}
	hashes := map[string]bool{}
	lines := 0
	for line := range strings.Lines(res.Stdout) {
		_, h, ok := strings.Cut(strings.TrimSpace(line), ", ")
		if !ok {
			t.Fatalf("etcdctl endpoint hashkv: line %q", line)
		}
		hashes[h] = true
		lines++
	}
	if lines != len(nodes) || len(hashes) != 1 {
		t.Errorf("etcdctl endpoint hashkv: got\n%s\nwant %d lines with one hash", res.Stdout, len(nodes))
	}
}

// endpointsOf is the nodes' client addresses as one comma list.
func endpointsOf(nodes []*Proc) string {
	addrs := make([]string, len(nodes))
	for i, p := range nodes {
		addrs[i] = p.ClientAddr
	}
	return strings.Join(addrs, ",")
}

// durationStats are percentiles of measured durations.
type durationStats struct {
	n             int
	p50, p99, max time.Duration
}

func statsOf(ds []time.Duration) durationStats {
	if len(ds) == 0 {
		return durationStats{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return durationStats{n: len(s), p50: at(0.50), p99: at(0.99), max: s[len(s)-1]}
}

func (s durationStats) String() string {
	return fmt.Sprintf("n=%d p50=%v p99=%v max=%v", s.n, s.p50, s.p99, s.max)
}

// startCtl runs etcdctl against endpoints (a comma list) in the background;
// the test's cleanup ends it.
func startCtl(t testing.TB, endpoints string, args ...string) *bgCtl {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b := &bgCtl{args: args, cancel: cancel, done: make(chan struct{})}
	b.cmd = etcdctlCmd(ctx, lookTool(t, "etcdctl"), endpoints, args...)
	b.cmd.Stdout = syncWriter{&b.mu, &b.stdout}
	b.cmd.Stderr = syncWriter{&b.mu, &b.stderr}
	if err := b.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start etcdctl %s: %v", strings.Join(args, " "), err)
	}
	go func() {
		_ = b.cmd.Wait() // the exit code is the kill's
		close(b.done)
	}()
	t.Cleanup(func() { b.cancel(); <-b.done })
	return b
}

// errorOnce keeps the first error of many goroutines.
type errorOnce struct {
	mu  sync.Mutex
	err error
}

func (e *errorOnce) set(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err == nil {
		e.err = err
	}
}

func (e *errorOnce) get() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}
