//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"chute/internal/testutil"
)

// Bounds of the raft tests' waits. Each is polled, never slept through.
const (
	leaderTimeout = 15 * time.Second // one leader known to every node
)

// raftView is what one node's Status says of raft.
type raftView struct {
	self   uint64 // the node's member id
	leader uint64
	term   uint64
}

// raftViews returns each node's Status, asked of the node alone.
func raftViews(clis []*clientv3.Client, nodes []*Proc) ([]raftView, error) {
	views := make([]raftView, len(clis))
	for i, cli := range clis {
		resp, err := nodeStatus(cli, nodes[i])
		if err != nil {
			return nil, err
		}
		views[i] = raftView{self: resp.Header.MemberId, leader: resp.Leader, term: resp.RaftTerm}
	}
	return views, nil
}

// nodeStatus is the Status of the node p, asked through cli.
func nodeStatus(cli *clientv3.Client, p *Proc) (*clientv3.StatusResponse, error) {
	ctx, cancel := rpcCtx()
	defer cancel()
	resp, err := cli.Status(ctx, p.ClientAddr)
	if err != nil {
		return nil, fmt.Errorf("%s: status: %w", p.Name, err)
	}
	return resp, nil
}

// waitLeader polls Status on every node until all name the same leader,
// one of nodes, in the same term, and returns that leader's index in
// nodes and the term.
func waitLeader(t testing.TB, nodes []*Proc, clis []*clientv3.Client) (int, uint64) {
	t.Helper()
	leader, term := -1, uint64(0)
	testutil.Eventually(t, leaderTimeout, "one leader named by every node", func() error {
		views, err := raftViews(clis, nodes)
		if err != nil {
			return err
		}
		leader = -1
		for i, v := range views {
			if v.leader == 0 || v.leader != views[0].leader || v.term != views[0].term {
				return fmt.Errorf("views (self, leader, term): %+v", views)
			}
			if v.self == v.leader {
				leader = i
			}
		}
		if leader < 0 {
			return fmt.Errorf("leader %016x is none of the nodes: %+v", views[0].leader, views)
		}
		term = views[0].term
		return nil
	})
	return leader, term
}

// startThreeRaft starts a, b and c (b and c join a) and waits until
// every node names one leader.
func (c *cluster) startThreeRaft(extra ...string) ([]*Proc, []*clientv3.Client) {
	c.t.Helper()
	a, b, cc := c.startThree(extra...)
	nodes := []*Proc{a, b, cc}
	clis := clientsOf(c.t, nodes...)
	waitLeader(c.t, nodes, clis)
	return nodes, clis
}

// relaunch starts p again, as Restart does, without waiting until it
// serves: a member of a cluster that lost its majority is not ready
// until enough others are back.
func relaunch(t testing.TB, p *Proc) {
	t.Helper()
	select {
	case <-p.Done():
	default:
		t.Fatalf("e2e: relaunch %s: it is still running", p)
	}
	if err := p.start(t); err != nil {
		t.Fatalf("e2e: relaunch %s: %v", p, err)
	}
}

// waitAllReady waits until every node of nodes serves.
func waitAllReady(t testing.TB, nodes ...*Proc) {
	t.Helper()
	for _, p := range nodes {
		if err := p.waitReady(leaderTimeout); err != nil {
			t.Fatalf("e2e: %v", err)
		}
	}
}
