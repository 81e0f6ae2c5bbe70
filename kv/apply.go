package kv

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"
)

// Every write to the key space is a command: an etcd InternalRaftRequest
// (the type etcd puts in its own raft log) carrying one of Put,
// DeleteRange, Txn, Compaction, LeaseGrant, LeaseRevoke or
// LeaseCheckpoint, and ID, the proposing member's request id. With a
// Consensus, every member applies every command in log order
// (StateMachine.Apply) and the proposing member hands the result to the
// waiting request by ID; alone, a member applies its commands directly.
//
// Apply is deterministic: it reads only the store and the command. What
// depends on the proposing member (a lease id chosen for the client, a
// TTL raised to the member's minimum) is decided before proposing and
// written into the command; what depends on the state (a missing lease,
// a failed compare, a compacted revision) is decided by Apply.

// applyResult is what applying a command gave: the response without its
// header, the revision the header carries, or the error.
type applyResult struct {
	resp any
	rev  int64
	err  error
}

// StateMachine is the key space as the consensus applies it: the commands
// of the log in order, snapshots, restores, and lease renewals at the
// leader. kv/raftkv adapts it to raft's FSM.
type StateMachine struct {
	s *store

	applied atomic.Uint64 // index of the last command applied, or of the restored snapshot

	mu       sync.Mutex // guards waits and idxWaits
	waits    map[uint64]chan applyResult
	idxWaits []indexWait // by index, ascending

	nextID atomic.Uint64 // request ids; starts at a random value

	// recordRenewal, set by Server.SetConsensus, makes a renewal known to
	// every member before RenewLease returns (leader.go). Nil: a member
	// alone, whose renewals need no record.
	recordRenewal func(id int64) error
}

// indexWait is a caller waiting for the state machine to reach idx.
type indexWait struct {
	idx uint64
	ch  chan struct{}
}

func newStateMachine(s *store) *StateMachine {
	m := &StateMachine{s: s, waits: make(map[uint64]chan applyResult)}
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics rather)
	// A random start: ids of different members (and runs) do not meet in
	// any log of realistic length.
	m.nextID.Store(binary.LittleEndian.Uint64(b[:]) >> 1)
	return m
}

// Applied returns the index of the last command applied, or of the last
// snapshot restored.
func (m *StateMachine) Applied() uint64 { return m.applied.Load() }

// Apply applies the command cmd committed at index in term. It never
// fails: a command that cannot be decoded or applied becomes the error
// result of its request, and every member reaches the same one.
func (m *StateMachine) Apply(index, term uint64, cmd []byte) {
	var req pb.InternalRaftRequest
	var res applyResult
	if err := proto.Unmarshal(cmd, &req); err != nil {
		res.err = fmt.Errorf("kv: command at index %d cannot be decoded: %w", index, err)
	} else {
		res = m.applyRequest(&req)
	}
	m.s.term.Store(term)
	m.advance(index)
	m.deliver(req.ID, res)
}

// Skip records an entry that carries no command (a configuration
// change) as applied at index, so that Applied reaches every index a
// read may wait for.
func (m *StateMachine) Skip(index, term uint64) {
	m.s.term.Store(term)
	m.advance(index)
}

// applyRequest applies one decoded command to the store.
func (m *StateMachine) applyRequest(req *pb.InternalRaftRequest) applyResult {
	s := m.s
	switch {
	case req.Put != nil:
		resp, rev, err := s.Put(req.Put)
		return applyResult{resp: resp, rev: rev, err: err}
	case req.DeleteRange != nil:
		resp, rev, err := s.DeleteRange(req.DeleteRange)
		return applyResult{resp: resp, rev: rev, err: err}
	case req.Txn != nil:
		resp, rev, err := s.Txn(req.Txn)
		return applyResult{resp: resp, rev: rev, err: err}
	case req.Compaction != nil:
		err := s.compact(req.Compaction.Revision)
		return applyResult{resp: &pb.CompactionResponse{}, rev: s.currentRev(), err: err}
	case req.LeaseGrant != nil:
		l, err := s.grant(req.LeaseGrant.ID, req.LeaseGrant.TTL)
		if err != nil {
			return applyResult{err: err, rev: s.currentRev()}
		}
		return applyResult{resp: &pb.LeaseGrantResponse{ID: l.id, TTL: l.ttl}, rev: s.currentRev()}
	case req.LeaseRevoke != nil:
		rev, err := s.revoke(req.LeaseRevoke.ID)
		if err != nil {
			rev = s.currentRev()
		}
		return applyResult{resp: &pb.LeaseRevokeResponse{}, rev: rev, err: err}
	case req.LeaseCheckpoint != nil:
		s.checkpoint(req.LeaseCheckpoint.Checkpoints)
		return applyResult{rev: s.currentRev()}
	}
	return applyResult{err: fmt.Errorf("kv: command %d carries no operation chute applies", req.ID), rev: s.currentRev()}
}

// advance records index as applied and wakes the callers waiting for it.
func (m *StateMachine) advance(index uint64) {
	m.applied.Store(index)
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for n < len(m.idxWaits) && m.idxWaits[n].idx <= index {
		close(m.idxWaits[n].ch)
		n++
	}
	if n > 0 {
		m.idxWaits = append(m.idxWaits[:0], m.idxWaits[n:]...)
	}
}

// deliver hands res to the request with id, if it waits on this member.
func (m *StateMachine) deliver(id uint64, res applyResult) {
	if id == 0 {
		return
	}
	m.mu.Lock()
	ch, ok := m.waits[id]
	delete(m.waits, id)
	m.mu.Unlock()
	if ok {
		ch <- res // buffered: never blocks
	}
}

// register makes the result of request id come to the returned channel;
// cancel forgets it.
func (m *StateMachine) register() (id uint64, ch <-chan applyResult, cancel func()) {
	id = m.nextID.Add(1)
	if id == 0 {
		id = m.nextID.Add(1)
	}
	c := make(chan applyResult, 1)
	m.mu.Lock()
	m.waits[id] = c
	m.mu.Unlock()
	return id, c, func() {
		m.mu.Lock()
		delete(m.waits, id)
		m.mu.Unlock()
	}
}

// failWaiting ends every waiting request with err: a restored snapshot
// replaced the state their commands would have been applied to, so their
// results are unknown.
func (m *StateMachine) failWaiting(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, ch := range m.waits {
		ch <- applyResult{err: err}
		delete(m.waits, id)
	}
}

// waitApplied returns once index is applied, or ctx ends.
func (m *StateMachine) waitApplied(ctx context.Context, index uint64) error {
	if m.applied.Load() >= index {
		return nil
	}
	m.mu.Lock()
	if m.applied.Load() >= index {
		m.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	i := sort.Search(len(m.idxWaits), func(i int) bool { return m.idxWaits[i].idx > index })
	m.idxWaits = append(m.idxWaits, indexWait{})
	copy(m.idxWaits[i+1:], m.idxWaits[i:])
	m.idxWaits[i] = indexWait{idx: index, ch: ch}
	m.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		m.mu.Lock()
		for j, w := range m.idxWaits {
			if w.ch == ch {
				m.idxWaits = append(m.idxWaits[:j], m.idxWaits[j+1:]...)
				break
			}
		}
		m.mu.Unlock()
		return ctx.Err()
	}
}

// RenewLease restarts a lease's TTL and returns it; ErrLeaseNotFound when
// the lease is gone. Only the leader renews: its deadlines are the ones
// that expire leases. With a consensus the renewal returns once a
// checkpoint of it is committed, so a member that becomes leader never
// expires a lease before the TTL of its last acknowledged renewal.
func (m *StateMachine) RenewLease(id int64) (int64, error) {
	ttl, err := m.s.renew(id)
	if err != nil || m.recordRenewal == nil {
		return ttl, err
	}
	return ttl, m.recordRenewal(id)
}

// checkpoint sets the deadlines of leases to what the leader reported, on
// every member, the leader included: a member that becomes leader starts
// from them. Remaining TTLs are whole seconds, as in etcd's
// LeaseCheckpoint, rounded up.
func (s *store) checkpoint(cps []*pb.LeaseCheckpoint) {
	now := s.cfg.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cp := range cps {
		if l, ok := s.leases[cp.ID]; ok && cp.Remaining_TTL > 0 {
			l.expires = now.Add(time.Duration(cp.Remaining_TTL) * time.Second)
		}
	}
}
