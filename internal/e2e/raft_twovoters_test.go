//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	"chute/internal/testutil"
)

// TestRaft_twoVoters_gracefulStop: of a cluster of two voters, the one
// stopped with SIGTERM (the leader, or the other) takes itself out of
// the raft configuration before it goes, and the one left writes alone.
// A voter that only left gossip left the other without a majority: the
// leader's removal of it needed its vote, and the key space stood still
// until it came back.
func TestRaft_twoVoters_gracefulStop(t *testing.T) {
	for _, stop := range []string{"leader", "follower"} {
		t.Run(stop, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t)
			a := c.startNode("a")
			b := c.startNode("b", "--join", a.GossipAddr)
			nodes := []*Proc{a, b}
			clis := clientsOf(t, a, b)
			testutil.Eventually(t, leaderTimeout, "two voters", func() error {
				ctx, cancel := rpcCtx()
				defer cancel()
				r, err := clis[0].MemberList(ctx)
				if err != nil {
					return err
				}
				if len(r.Members) != 2 {
					return fmt.Errorf("%d members", len(r.Members))
				}
				for _, m := range r.Members {
					if m.IsLearner {
						return fmt.Errorf("%s is a learner", m.Name)
					}
				}
				return nil
			})
			leader, _ := waitLeader(t, nodes, clis)
			gone := leader
			if stop == "follower" {
				gone = 1 - leader
			}
			if err := nodes[gone].Stop(); err != nil {
				t.Fatalf("stop %s: %v", nodes[gone].Name, err)
			}
			left := clis[1-gone]
			testutil.Eventually(t, 15*time.Second, "a put on the node left", func() error {
				ctx, cancel := rpcCtx()
				defer cancel()
				_, err := left.Put(ctx, "k", "v")
				return err
			})
			ctx, cancel := rpcCtx()
			defer cancel()
			r, err := left.MemberList(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Members) != 1 {
				t.Errorf("members after the stop: %d, want 1", len(r.Members))
			}
		})
	}
}
