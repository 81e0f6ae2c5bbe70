//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"chute/internal/testutil"
)

// ctlEndpointStatus is one entry of `etcdctl endpoint status -w json`.
type ctlEndpointStatus struct {
	Endpoint string
	Status   struct {
		Header struct {
			MemberID uint64 `json:"member_id"`
			RaftTerm uint64 `json:"raft_term"`
		} `json:"header"`
		Leader   uint64 `json:"leader"`
		RaftTerm uint64 `json:"raftTerm"`
	}
}

// ctlStatus runs `etcdctl endpoint status -w json` on every node at once.
func ctlStatus(etcdctl string, nodes []*Proc) ([]ctlEndpointStatus, error) {
	res, err := runEtcdctl(etcdctl, endpointsOf(nodes), "", "endpoint", "status", "-w", "json")
	if err != nil {
		return nil, err
	}
	if res.Code != 0 {
		return nil, fmt.Errorf("etcdctl endpoint status: exit %d: %s", res.Code, res.Stderr)
	}
	var st []ctlEndpointStatus
	if err := json.Unmarshal([]byte(res.Stdout), &st); err != nil {
		return nil, fmt.Errorf("etcdctl endpoint status: %v: %s", err, res.Stdout)
	}
	if len(st) != len(nodes) {
		return nil, fmt.Errorf("etcdctl endpoint status: got %d endpoints, want %d: %s", len(st), len(nodes), res.Stdout)
	}
	return st, nil
}

// waitCtlLeader polls `etcdctl endpoint status` until every endpoint
// names the same leader, one of them, in the same term, and returns the
// leader's member id and the term.
func waitCtlLeader(t testing.TB, etcdctl string, nodes []*Proc) (uint64, uint64) {
	t.Helper()
	var leader, term uint64
	testutil.Eventually(t, leaderTimeout, "etcdctl endpoint status naming one leader", func() error {
		st, err := ctlStatus(etcdctl, nodes)
		if err != nil {
			return err
		}
		isMember := false
		for _, s := range st {
			if s.Status.Leader == 0 || s.Status.Leader != st[0].Status.Leader ||
				s.Status.RaftTerm != st[0].Status.RaftTerm || s.Status.Header.RaftTerm != s.Status.RaftTerm {
				return fmt.Errorf("endpoints disagree: %+v", st)
			}
			isMember = isMember || s.Status.Header.MemberID == s.Status.Leader
		}
		if !isMember {
			return fmt.Errorf("leader %x is none of the endpoints: %+v", st[0].Status.Leader, st)
		}
		leader, term = st[0].Status.Leader, st[0].Status.RaftTerm
		return nil
	})
	return leader, term
}

// `endpoint status` names the real leader and term on every endpoint;
// `move-leader` moves it, and refuses a member that does not exist.
func TestRaft_endpointStatusAndMoveLeader(t *testing.T) {
	t.Parallel()
	nodes, clis := newCluster(t).startThreeRaft()
	etcdctl := lookTool(t, "etcdctl")

	leaderID, term := waitCtlLeader(t, etcdctl, nodes)
	leader, statusTerm := waitLeader(t, nodes, clis)
	views, err := raftViews(clis, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if views[leader].self != leaderID || statusTerm != term {
		t.Errorf("etcdctl says leader %x in term %d, Status says %x in term %d", leaderID, term, views[leader].self, statusTerm)
	}

	target := views[(leader+1)%3].self
	res, err := runEtcdctl(etcdctl, endpointsOf(nodes), "", "move-leader", strconv.FormatUint(target, 16))
	if err != nil || res.Code != 0 {
		t.Fatalf("etcdctl move-leader %x: %v %+v", target, err, res)
	}
	if !strings.Contains(res.Stdout, fmt.Sprintf("Leadership transferred from %x to %x", leaderID, target)) {
		t.Errorf("etcdctl move-leader %x: got %q, want it to say so", target, res.Stdout)
	}
	newID, newTerm := waitCtlLeader(t, etcdctl, nodes)
	if newID != target || newTerm <= term {
		t.Errorf("after move-leader %x: leader %x in term %d, want %x in a term after %d", target, newID, newTerm, target, term)
	}

	res, err = runEtcdctl(etcdctl, endpointsOf(nodes), "", "move-leader", "abcdef0123")
	if err != nil {
		t.Fatal(err)
	}
	if res.Code == 0 || !strings.Contains(res.Stderr, "bad leader transferee") {
		t.Errorf("etcdctl move-leader to an unknown member: got exit %d, %q; want an error with %q", res.Code, res.Stderr, "bad leader transferee")
	}
	if id, _ := waitCtlLeader(t, etcdctl, nodes); id != target {
		t.Errorf("after a refused move-leader: leader %x, want %x still", id, target)
	}
}
