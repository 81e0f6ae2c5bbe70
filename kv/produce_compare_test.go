package kv

import (
	"context"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

// behindMember is oneMember on a member that has not applied the last
// write the cluster committed (held): its read index is one past what it
// applied until the test applies held.
type behindMember struct {
	*oneMember
	held []byte
}

func (c *behindMember) ReadIndex(context.Context) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ix := c.srv.StateMachine().Applied()
	if c.held != nil {
		ix++
	}
	return ix, nil
}

// catchUp applies the held write, as the member would once the leader's
// append reaches it.
func (c *behindMember) catchUp() {
	c.mu.Lock()
	cmd := c.held
	c.held = nil
	c.mu.Unlock()
	if err := c.apply("propose", cmd); err != nil {
		panic(err)
	}
}

// TestProduceTxn_comparesSeeCommittedWrites: a batch produce's compares
// are judged after every write the cluster acknowledged before the txn,
// as a read-only txn's are, on a member that had not applied it yet:
// they were judged on what it had applied, and a gate closed before the
// txn let its rows in.
func TestProduceTxn_comparesSeeCommittedWrites(t *testing.T) {
	q := &viewQueues{}
	var c *behindMember
	srv, cli := startServerWith(t, func(cfg *Config) { cfg.Queues = q }, func(s *Server) {
		c = &behindMember{oneMember: newOneMember(1)}
		c.srv = s
		s.SetConsensus(c)
	})
	ctx := testCtx(t, 10*time.Second)
	for i := 0; !srv.Synced(); i++ { // before the member falls behind
		if i == 500 {
			t.Fatal("the member did not catch up at start in 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd, err := proto.Marshal(&pb.InternalRaftRequest{Put: &pb.PutRequest{Key: []byte("gate"), Value: []byte("closed")}})
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.held = cmd // committed by the cluster, not applied here
	c.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(200 * time.Millisecond)
		c.catchUp()
	}()
	resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision("gate"), "=", 0)).
		Then(clientv3.OpPut("/q/x/p/1", "row")).Commit()
	<-done
	if err != nil {
		t.Fatal(err)
	}
	q.mu.Lock()
	kept := len(q.kept)
	q.mu.Unlock()
	if resp.Succeeded || kept != 0 {
		t.Fatalf("a produce gated on a key the cluster had written: succeeded %v, %d rows queued; want false, 0", resp.Succeeded, kept)
	}
	if resp.Header.Revision < 2 {
		t.Fatalf("answered at revision %d, before the gate's write", resp.Header.Revision)
	}
}
