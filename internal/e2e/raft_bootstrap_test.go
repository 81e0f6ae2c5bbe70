//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"chute/gossip"
	"chute/internal/testutil"
)

// Three nodes with --bootstrap-expect 3, each joining the other two,
// make one raft cluster with one leader in whatever order they start.
func TestRaft_bootstrap_expectThreeAnyOrder(t *testing.T) {
	t.Parallel()
	for _, order := range [][3]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}} {
		t.Run(fmt.Sprintf("%d%d%d", order[0], order[1], order[2]), func(t *testing.T) {
			c := newCluster(t)
			c.name = fmt.Sprintf("e2e-bootstrap-%d%d%d", order[0], order[1], order[2])
			plans := []nodePlan{c.plan("a"), c.plan("b"), c.plan("c")}
			nodes := make([]*Proc, 3)
			start := time.Now()
			for _, i := range order {
				var seeds []string
				for j, pl := range plans {
					if j != i {
						seeds = append(seeds, pl.GossipAddr)
					}
				}
				p, err := launchChute(t, c.args(plans[i], "--bootstrap-expect", "3", "--join", strings.Join(seeds, ",")), c.env)
				if err != nil {
					t.Fatalf("launch %s: %v", plans[i].Name, err)
				}
				nodes[i] = p
				waitHealthy(t, p) // the next one starts after this one runs
			}
			waitAllReady(t, nodes...)
			clis := clientsOf(t, nodes...)
			leader, term := waitLeader(t, nodes, clis)
			requireOneKeySpace(t, nodes, clis)
			t.Logf("order %v: leader %s in term %d, %v after the first start", order, nodes[leader].Name, term, time.Since(start).Round(time.Millisecond))
		})
	}
}

// waitHealthy polls p's /healthz until it answers 200.
func waitHealthy(t testing.TB, p *Proc) {
	t.Helper()
	client := &http.Client{Timeout: time.Second}
	testutil.Eventually(t, readyTimeout, p.Name+" /healthz", func() error {
		resp, err := client.Get("http://" + p.MetricsAddr + "/healthz")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /healthz: %s", resp.Status)
		}
		return nil
	})
}

// requireOneKeySpace puts a key through each node in turn and requires
// every node to read all of them at the revisions the puts returned.
func requireOneKeySpace(t testing.TB, nodes []*Proc, clis []*clientv3.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), convergeTimeout)
	defer cancel()
	revs := make([]int64, len(clis))
	for i, cli := range clis {
		resp, err := cli.Put(ctx, "one/"+nodes[i].Name, "x")
		if err != nil {
			t.Fatalf("put through %s: %v", nodes[i].Name, err)
		}
		revs[i] = resp.Header.Revision
	}
	for i, cli := range clis {
		resp, err := cli.Get(ctx, "one/", clientv3.WithPrefix())
		if err != nil {
			t.Fatalf("get on %s: %v", nodes[i].Name, err)
		}
		got := map[string]int64{}
		for _, kv := range resp.Kvs {
			got[string(kv.Key)] = kv.ModRevision
		}
		for j, p := range nodes {
			if got["one/"+p.Name] != revs[j] {
				t.Errorf("%s: one/%s at revision %d, want %d (put through %s)", nodes[i].Name, p.Name, got["one/"+p.Name], revs[j], p.Name)
			}
		}
	}
}

// With the default --bootstrap-expect, nodes that join the first make one
// cluster; a fourth becomes a non-voter, promoted once a voter is dead
// for the grace period, and it then votes.
func TestRaft_bootstrap_joinFirstAndReplace(t *testing.T) {
	t.Parallel()
	const grace = 5 * time.Second
	nodes, clis, all, allClis, leader := startThreeAndD(t, grace)
	d := all[3]
	dID := serverIDPrefix(t, allClis[3], d)
	waitRaftLogLine(t, all, membershipTimeout, "configuration changed", "add non-voter", dID)
	waitLearner(t, allClis[0], d, true)

	// Kill a voter that does not lead: the leader removes it after the
	// grace period and promotes d.
	dead := (leader + 1) % 3
	deadID := serverIDPrefix(t, clis[dead], nodes[dead])
	killed := time.Now()
	nodes[dead].Kill()
	var live []*Proc
	for i, p := range all {
		if i != dead {
			live = append(live, p)
		}
	}
	waitRaftLogLine(t, live, 30*time.Second, "configuration changed", "remove", deadID)
	waitRaftLogLine(t, live, 30*time.Second, "configuration changed", "add voter", dID)
	waitLearner(t, allClis[leader], d, false)
	t.Logf("%s killed: replaced by %s within %v", nodes[dead].Name, d.Name, time.Since(killed).Round(time.Millisecond))
	waitMembers(t, live, live)

	// d votes: with the third original voter killed too, the leader and
	// d are a majority of three and writes go on.
	other := 3 - leader - dead
	nodes[other].Kill()
	ctx, cancel := context.WithTimeout(context.Background(), convergeTimeout)
	defer cancel()
	if _, err := clis[leader].Put(ctx, "after/replace", "x"); err != nil {
		t.Fatalf("put with %s and %s alive: %v, want d to vote", nodes[leader].Name, d.Name, err)
	}
	if resp, err := allClis[3].Get(ctx, "after/replace"); err != nil || len(resp.Kvs) != 1 {
		t.Errorf("get on %s: got %v, %v; want the key", d.Name, resp, err)
	}
}

// serverIDPrefix is the start of p's raft server id: its member id in 16
// hex digits and a dash.
func serverIDPrefix(t testing.TB, cli *clientv3.Client, p *Proc) string {
	t.Helper()
	st, err := nodeStatus(cli, p)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%016x-", st.Header.MemberId)
}

// waitRaftLogLine polls the logs of nodes until one has a line holding every
// one of parts.
func waitRaftLogLine(t testing.TB, nodes []*Proc, timeout time.Duration, parts ...string) {
	t.Helper()
	testutil.EventuallyTrue(t, timeout, fmt.Sprintf("a log line with %q", parts), func() bool {
		for _, p := range nodes {
			for line := range strings.Lines(p.Log()) {
				found := true
				for _, part := range parts {
					found = found && strings.Contains(line, part)
				}
				if found {
					return true
				}
			}
		}
		return false
	})
}

// waitLearner waits until MemberList through cli lists p with isLearner
// as want, and p's own Status says so too (etcdctl endpoint status's IS
// LEARNER): a non-voter of raft is a learner, as in etcd.
func waitLearner(t testing.TB, cli *clientv3.Client, p *Proc, want bool) {
	t.Helper()
	testutil.Eventually(t, membershipTimeout, fmt.Sprintf("%s listed with isLearner=%v", p.Name, want), func() error {
		ctx, cancel := rpcCtx()
		defer cancel()
		resp, err := cli.MemberList(ctx)
		if err != nil {
			return err
		}
		for _, m := range resp.Members {
			if m.Name == p.Name {
				if m.IsLearner != want {
					return fmt.Errorf("isLearner=%v", m.IsLearner)
				}
				st, err := cli.Status(ctx, p.ClientAddr)
				if err != nil {
					return err
				}
				if st.IsLearner != want {
					return fmt.Errorf("its own Status: isLearner=%v", st.IsLearner)
				}
				return nil
			}
		}
		return fmt.Errorf("%s not listed", p.Name)
	})
}

// TestRaft_bootstrap_memberRemoveOfFailedVoter: etcdctl member remove of
// a failed voter takes it out of raft at once, as etcd's member remove
// does and operations.md says, and the non-voter takes its seat: serf
// marks the member left and forgets it a moment later, and a leader that
// saw it only as failed, then gone, kept its seat for the whole
// --raft-dead-server-grace (here 10 minutes), half the runs.
func TestRaft_bootstrap_memberRemoveOfFailedVoter(t *testing.T) {
	t.Parallel()
	nodes, clis, all, allClis, leader := startThreeAndD(t, 10*time.Minute)
	waitLearner(t, allClis[0], all[3], true)
	dead := (leader + 1) % 3
	deadID := serverIDPrefix(t, clis[dead], nodes[dead])
	nodes[dead].Kill()
	var live []*Proc
	for i, p := range all {
		if i != dead {
			live = append(live, p)
		}
	}
	waitMembers(t, live, live) // seen failed everywhere first
	testutil.Eventually(t, membershipTimeout, "etcdctl member remove of the failed voter", func() error {
		ctx, cancel := rpcCtx()
		defer cancel()
		_, err := allClis[leader].MemberRemove(ctx, gossip.MemberID(nodes[dead].Name))
		return err
	})
	waitRaftLogLine(t, live, 20*time.Second, "configuration changed", "remove", deadID)
	waitLearner(t, allClis[leader], all[3], false)
}

// startThreeAndD starts three nodes that make one raft cluster, then a
// fourth, d, that joins them (a non-voter), all with grace as
// --raft-dead-server-grace; it returns the three and their clients, the
// four (d last) and theirs, and the leader, one of the three.
func startThreeAndD(t *testing.T, grace time.Duration) ([]*Proc, []*clientv3.Client, []*Proc, []*clientv3.Client, int) {
	t.Helper()
	c := newCluster(t)
	nodes, clis := c.startThreeRaft("--raft-dead-server-grace", grace.String())
	requireOneKeySpace(t, nodes, clis)
	d := c.startNode("d", "--join", nodes[0].GossipAddr, "--raft-dead-server-grace", grace.String())
	all := append(append([]*Proc{}, nodes...), d)
	allClis := append(append([]*clientv3.Client{}, clis...), clusterClient(t, d.ClientAddr))
	waitMembers(t, all, all)
	leader, _ := waitLeader(t, all, allClis)
	if leader == 3 {
		t.Fatalf("the new node %s leads, want one of the first three", d.Name)
	}
	return nodes, clis, all, allClis, leader
}
