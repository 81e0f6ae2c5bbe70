// Package kvtest gives tests of other packages a key space shared by
// several kv.Servers of one process, without raft: Log orders every
// member's writes in one log and applies each to every member at once.
//
// It is for tests of what runs on top of the key space (dispatch's
// queues: dispatcher records, settings, consumers), where members come
// and go and the key space must simply stay consistent: a member that
// stops leaves the log, one that starts (again) catches up from a
// snapshot of the others. Raft itself, with its elections, forwarding
// and faults, is tested with the real one (kv/raftkv, and end to end in
// internal/e2e).
package kvtest

import (
	"bytes"
	"context"
	"slices"
	"sync"

	"chute/kv"
)

// Log is the ordered log of the members that joined it. The first member
// still in it leads: it keeps the lease deadlines and compacts.
type Log struct {
	mu      sync.Mutex // guards index and members; held while applying, so every member applies in one order
	index   uint64
	members []*member
}

type member struct {
	log *Log
	srv *kv.Server
	id  uint64
}

// New returns an empty log.
func New() *Log { return &Log{} }

// Join makes srv a member of the log and returns the Consensus to give it
// (Server.SetConsensus) before it starts. A member joining a log with
// members is first restored from a snapshot of the leader's state.
// memberID is srv's member id, as Status reports the leader.
func (l *Log) Join(srv *kv.Server, memberID uint64) (kv.Consensus, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.members) > 0 {
		write, err := l.members[0].srv.StateMachine().Snapshot()
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		if err := write(&buf); err != nil {
			return nil, err
		}
		if err := srv.StateMachine().Restore(&buf); err != nil {
			return nil, err
		}
	}
	m := &member{log: l, srv: srv, id: memberID}
	l.members = append(l.members, m)
	return m, nil
}

// Leave takes srv out of the log: it is applied nothing more, and its
// proposals fail with kv.ErrNoLeader.
func (l *Log) Leave(srv *kv.Server) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.members = slices.DeleteFunc(l.members, func(m *member) bool { return m.srv == srv })
}

// in reports whether m is still a member. The caller holds l.mu.
func (m *member) in() bool { return slices.Contains(m.log.members, m) }

func (m *member) Propose(_ context.Context, cmd []byte) error {
	l := m.log
	l.mu.Lock()
	defer l.mu.Unlock()
	if !m.in() {
		return kv.ErrNoLeader
	}
	l.append(cmd)
	return nil
}

// ProposeAsLeader is Propose for the member that leads; the log has one
// term, 1.
func (m *member) ProposeAsLeader(_ context.Context, term uint64, cmd []byte) error {
	l := m.log
	l.mu.Lock()
	defer l.mu.Unlock()
	if term != 1 || len(l.members) == 0 || l.members[0] != m {
		return kv.ErrNotLeader
	}
	l.append(cmd)
	return nil
}

// append applies cmd to every member at the next index. The caller
// holds l.mu.
func (l *Log) append(cmd []byte) {
	l.index++
	for _, o := range l.members {
		o.srv.StateMachine().Apply(l.index, 1, cmd)
	}
}

func (m *member) ReadIndex(context.Context) (uint64, error) {
	l := m.log
	l.mu.Lock()
	defer l.mu.Unlock()
	if !m.in() {
		return 0, kv.ErrNoLeader
	}
	return m.srv.StateMachine().Applied(), nil
}

func (m *member) RenewLease(_ context.Context, id int64) (int64, error) {
	l := m.log
	l.mu.Lock()
	if !m.in() || len(l.members) == 0 {
		l.mu.Unlock()
		return 0, kv.ErrNoLeader
	}
	leader := l.members[0].srv
	l.mu.Unlock()
	return leader.StateMachine().RenewLease(id)
}

func (m *member) TransferLeader(context.Context, uint64) error { return kv.ErrBadTransferee }

func (m *member) Status() kv.ConsensusStatus {
	l := m.log
	l.mu.Lock()
	defer l.mu.Unlock()
	st := kv.ConsensusStatus{Term: 1, CommitIndex: l.index, LastIndex: l.index}
	if m.in() {
		st.Leader = l.members[0].id
		st.IsLeader = l.members[0] == m
	}
	return st
}
