package raftpeer

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"chute/internal/testutil"
)

// TestTransport_accepted counts, for a leadership check, only the
// AppendEntries requests sent after its mark and accepted in their term:
// an answer to a request sent before the mark (a heartbeat on the way
// while the leader was frozen) and an answer in a later term do not.
func TestTransport_accepted(t *testing.T) {
	server := servedTransport(t, nil)
	client := newTransport(t, testutil.FreeAddr(t), nil)
	target := server.LocalAddr()

	// The follower answers in its own term when that is later, as raft
	// does; requests wait for hold to be closed when one is set.
	var followerTerm atomic.Uint64
	var hold atomic.Pointer[chan struct{}]
	received := make(chan struct{}, 16)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case rpc := <-server.Consumer():
				req := rpc.Command.(*raft.AppendEntriesRequest)
				received <- struct{}{}
				if h := hold.Load(); h != nil {
					<-*h
				}
				rpc.Respond(&raft.AppendEntriesResponse{Term: max(req.Term, followerTerm.Load()), Success: req.Term >= followerTerm.Load()}, nil)
			case <-stop:
				return
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
	})
	send := func(term uint64) {
		t.Helper()
		var resp raft.AppendEntriesResponse
		if err := client.AppendEntries("s", target, &raft.AppendEntriesRequest{Term: term}, &resp); err != nil {
			t.Fatal(err)
		}
	}
	accepted := func(term, mark uint64) bool {
		peers, _ := client.Accepted(term, mark)
		return slices.Contains(peers, target)
	}

	mark := client.Mark()
	if accepted(3, mark) {
		t.Fatal("a peer accepted before any request was sent")
	}
	_, changed := client.Accepted(3, mark)
	send(3)
	select {
	case <-changed:
	default:
		t.Error("Accepted's channel still open after a peer accepted a request")
	}
	if !accepted(3, mark) {
		t.Error("a request of term 3 sent after the mark and accepted: not counted")
	}
	if accepted(2, mark) || accepted(4, mark) {
		t.Error("a request accepted in term 3 counted for another term")
	}
	if accepted(3, client.Mark()) {
		t.Error("a request sent before the mark counted")
	}

	t.Run("pipeline", func(t *testing.T) {
		p, err := client.AppendEntriesPipeline("s", target)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		mark := client.Mark()
		f, err := p.AppendEntries(&raft.AppendEntriesRequest{Term: 3}, new(raft.AppendEntriesResponse))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Error(); err != nil {
			t.Fatal(err)
		}
		if !accepted(3, mark) {
			t.Error("a pipelined request of term 3 sent after the mark and accepted: not counted")
		}
	})

	t.Run("answered after the mark, sent before", func(t *testing.T) {
		for len(received) > 0 { // the earlier requests'
			<-received
		}
		h := make(chan struct{})
		hold.Store(&h)
		defer hold.Store(nil)
		answered := make(chan struct{})
		go func() {
			defer close(answered)
			var resp raft.AppendEntriesResponse
			_ = client.AppendEntries("s", target, &raft.AppendEntriesRequest{Term: 3}, &resp)
		}()
		select {
		case <-received: // the request is at the follower: sent
		case <-time.After(5 * time.Second):
			t.Fatal("the request never reached the follower")
		}
		mark := client.Mark()
		close(h)
		<-answered
		if accepted(3, mark) {
			t.Error("the answer to a request sent before the mark counted")
		}
	})

	t.Run("answered in a later term", func(t *testing.T) {
		followerTerm.Store(5)
		mark := client.Mark()
		send(3)
		if accepted(3, mark) {
			t.Error("a request the follower answered in term 5 counted for term 3")
		}
	})
}
