//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"chute/kv/v3electionpb"
	"chute/kv/v3lockpb"
)

// TestRecipes_etcdParity calls etcd's Lock and Election APIs with the
// same requests on etcd 3.4 and on chute, from clients of chute's
// declarations of them: both answer the same (the holder's key is the
// name, "/" and the lease in hex; the leader's value follows Proclaim;
// Leader after Resign is "election: no leader"), so the declarations
// are etcd's wire and chute serves what etcd serves.
func TestRecipes_etcdParity(t *testing.T) {
	t.Parallel()
	var got [2][]string
	for i, p := range []*Proc{StartEtcd(t), StartChute(t)} {
		got[i] = recipeTranscript(t, p)
	}
	sameTranscripts(t, got[0], got[1])
}

// sameTranscripts fails t at each step where chute's answer is not
// etcd's, a missing step answering "".
func sameTranscripts(t *testing.T, etcd, chute []string) {
	t.Helper()
	t.Logf("etcd's answers: %q", etcd)
	for i := range max(len(etcd), len(chute)) {
		var e, c string
		if i < len(etcd) {
			e = etcd[i]
		}
		if i < len(chute) {
			c = chute[i]
		}
		if e != c {
			t.Errorf("step %d:\n etcd:  %s\n chute: %s", i, e, c)
		}
	}
}

// recipeTranscript runs the steps on p and says what each answered,
// leases and revisions named by what they are to the steps.
func recipeTranscript(t *testing.T, p *Proc) []string {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{p.ClientAddr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("clientv3 %s: %v", p, err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatalf("grant on %s: %v", p.Kind, err)
	}
	lease := int64(g.ID)
	hex := fmt.Sprintf("%x", lease)
	name := func(b []byte) string { // the lease's hex stands for itself
		s := string(b)
		if len(s) >= len(hex) && s[len(s)-len(hex):] == hex {
			s = s[:len(s)-len(hex)] + "<lease>"
		}
		return s
	}
	var out []string
	say := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }

	lc := v3lockpb.NewLockClient(cli.ActiveConnection())
	l, err := lc.Lock(ctx, &v3lockpb.LockRequest{Name: []byte("lk"), Lease: lease})
	if err != nil {
		say("lock: %v", err)
	} else {
		say("lock: key %s, header revision > 0: %v", name(l.Key), l.Header.GetRevision() > 0)
		_, err = lc.Unlock(ctx, &v3lockpb.UnlockRequest{Key: l.Key})
		say("unlock: %v", err)
	}
	if keys, err := cli.Get(ctx, "lk/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil {
		say("keys under lk/ after unlock: %v", err)
	} else {
		say("keys under lk/ after unlock: %d", keys.Count)
	}

	ec := v3electionpb.NewElectionClient(cli.ActiveConnection())
	c, err := ec.Campaign(ctx, &v3electionpb.CampaignRequest{Name: []byte("el"), Lease: lease, Value: []byte("v1")})
	if err != nil {
		say("campaign: %v", err)
		return out
	}
	say("campaign: name %s key %s lease matches %v rev > 0 %v", c.Leader.Name, name(c.Leader.Key), c.Leader.Lease == lease, c.Leader.Rev > 0)
	_, err = ec.Proclaim(ctx, &v3electionpb.ProclaimRequest{Leader: c.Leader, Value: []byte("v2")})
	say("proclaim: %v", err)
	ld, err := ec.Leader(ctx, &v3electionpb.LeaderRequest{Name: []byte("el")})
	say("leader: key %s value %s lease matches %v, %v", name(ld.GetKv().GetKey()), ld.GetKv().GetValue(), ld.GetKv().GetLease() == lease, err)
	_, err = ec.Resign(ctx, &v3electionpb.ResignRequest{Leader: c.Leader})
	say("resign: %v", err)
	_, err = ec.Leader(ctx, &v3electionpb.LeaderRequest{Name: []byte("el")})
	say("leader after resign: %v", err)
	_, err = ec.Proclaim(ctx, &v3electionpb.ProclaimRequest{Leader: c.Leader, Value: []byte("v3")})
	say("proclaim after resign: %v", err)
	return out
}

// TestRecipes_threeNodes locks and elects across a raft cluster of three:
// a Lock on one node holds while a Lock on another waits, and the waiter
// gets the lock once the holder unlocks on a third; a Campaign waiting on
// one node leads once the leader, on another, resigns, and Leader on the
// third names it.
func TestRecipes_threeNodes(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	_, clis := c.startThreeRaft()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lease := func(i int) int64 {
		g, err := clis[i].Grant(ctx, 60)
		if err != nil {
			t.Fatalf("grant on node %d: %v", i, err)
		}
		return int64(g.ID)
	}
	locks := func(i int) v3lockpb.LockClient { return v3lockpb.NewLockClient(clis[i].ActiveConnection()) }
	elections := func(i int) v3electionpb.ElectionClient {
		return v3electionpb.NewElectionClient(clis[i].ActiveConnection())
	}

	held, err := locks(0).Lock(ctx, &v3lockpb.LockRequest{Name: []byte("lk"), Lease: lease(0)})
	if err != nil {
		t.Fatalf("Lock on node 0: %v", err)
	}
	waiter := make(chan error, 1)
	go func() {
		_, err := locks(1).Lock(ctx, &v3lockpb.LockRequest{Name: []byte("lk"), Lease: lease(1)})
		waiter <- err
	}()
	waitsUntil(t, waiter, "Lock on node 1", "the unlock on node 2", func() error {
		_, err := locks(2).Unlock(ctx, &v3lockpb.UnlockRequest{Key: held.Key})
		return err
	})

	first, err := elections(0).Campaign(ctx, &v3electionpb.CampaignRequest{Name: []byte("el"), Lease: lease(0), Value: []byte("n0")})
	if err != nil {
		t.Fatalf("Campaign on node 0: %v", err)
	}
	second := make(chan error, 1)
	go func() {
		_, err := elections(1).Campaign(ctx, &v3electionpb.CampaignRequest{Name: []byte("el"), Lease: lease(1), Value: []byte("n1")})
		second <- err
	}()
	waitsUntil(t, second, "Campaign on node 1", "the resignation on node 0", func() error {
		_, err := elections(0).Resign(ctx, &v3electionpb.ResignRequest{Leader: first.Leader})
		return err
	})
	l, err := elections(2).Leader(ctx, &v3electionpb.LeaderRequest{Name: []byte("el")})
	if err != nil || string(l.Kv.GetValue()) != "n1" {
		t.Fatalf("Leader on node 2: %v, %v; want n1", l, err)
	}
}

// waitsUntil wants the call answering on answer to wait for half a
// second, then release to succeed, then the call to succeed within 10 s.
func waitsUntil(t *testing.T, answer <-chan error, call, after string, release func() error) {
	t.Helper()
	select {
	case err := <-answer:
		t.Fatalf("%s answered before %s: %v", call, after, err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := release(); err != nil {
		t.Fatalf("%s: %v", after, err)
	}
	select {
	case err := <-answer:
		if err != nil {
			t.Fatalf("%s after %s: %v", call, after, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no answer 10 s after %s", call, after)
	}
}
