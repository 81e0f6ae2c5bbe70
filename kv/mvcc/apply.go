package mvcc

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"

	"chute/kv/auth"
)

// Every write to the key space is a command: an etcd InternalRaftRequest
// (the type etcd puts in its own raft log) carrying one of Put,
// DeleteRange, Txn, Compaction, LeaseGrant, LeaseRevoke,
// LeaseCheckpoint, Alarm or one of etcd's auth commands, and ID, the proposing member's request id. With a
// consensus (kv.Consensus), every member applies every command in log
// order (StateMachine.ApplyEntry) and the proposing member hands the result to
// the waiting request by ID (Register); alone, a member applies its
// commands directly (ApplyLocal).
//
// Apply is deterministic: it reads only the store and the command. What
// depends on the proposing member (a lease id chosen for the client, a
// TTL raised to the member's minimum) is decided before proposing and
// written into the command; what depends on the state (a missing lease,
// a failed compare, a compacted revision) is decided by Apply.

// Result is what applying a command gave.
type Result struct {
	// Resp is the response without its header: a *pb.PutResponse,
	// *pb.DeleteRangeResponse, *pb.TxnResponse, *pb.CompactionResponse,
	// *pb.LeaseGrantResponse, *pb.LeaseRevokeResponse or
	// *pb.AlarmResponse or the auth command's response, as the command asked; nil with Err, and for a
	// checkpoint.
	Resp any
	// Rev is the store revision the response header carries.
	Rev int64
	// Err is why the command failed: an error of this package, or one
	// that the command could not be decoded.
	Err error
}

// StateMachine is the key space as the consensus applies it: the commands
// of the log in order, snapshots, restores, and lease renewals at the
// leader. kv/raftkv adapts it to raft's FSM. It also hands each command's
// result to the request of this member that waits for it (Register), and
// wakes the reads waiting for an index to be applied (WaitApplied).
type StateMachine struct {
	s    *Store
	auth *auth.Store // users, roles, permissions: changed by auth commands only

	applied atomic.Uint64 // index of the last command applied, or of the restored snapshot

	mu       sync.Mutex // guards waits and idxWaits
	waits    map[uint64]chan Result
	idxWaits []indexWait // by index, ascending

	nextID atomic.Uint64 // request ids; starts at a random value

	// recordRenewal, set by SetRecordRenewal, makes a renewal known to
	// every member before RenewLease returns. Nil: a member alone, whose
	// renewals need no record.
	recordRenewal func(id int64) error
}

// indexWait is a caller waiting for the state machine to reach idx.
type indexWait struct {
	idx uint64
	ch  chan struct{}
}

// NewStateMachine returns the state machine that applies commands to s.
// Writes to s must come only through it.
func NewStateMachine(s *Store) *StateMachine {
	m := &StateMachine{s: s, auth: auth.NewStore(), waits: make(map[uint64]chan Result)}
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics rather)
	// A random start: ids of different members (and runs) do not meet in
	// any log of realistic length.
	m.nextID.Store(binary.LittleEndian.Uint64(b[:]) >> 1)
	return m
}

// Auth returns the auth state the log's auth commands change. Callers
// only read it; writes come through Apply.
func (m *StateMachine) Auth() *auth.Store { return m.auth }

// Applied returns the index of the last command applied, or of the last
// snapshot restored.
func (m *StateMachine) Applied() uint64 { return m.applied.Load() }

// Apply applies the command cmd committed at index in term, the only
// command of its entry (ApplyEntry).
func (m *StateMachine) Apply(index, term uint64, cmd []byte) {
	m.ApplyEntry(index, term, [][]byte{cmd})
}

// ApplyEntry applies the commands of the entry committed at index in
// term, in order, and only then records index as applied: a read
// waiting for index (WaitApplied) must not run between two commands of
// a packed entry. It never fails: a command that cannot be decoded or
// applied becomes the error result of its request, and every member
// reaches the same one.
func (m *StateMachine) ApplyEntry(index, term uint64, cmds [][]byte) {
	type delivery struct {
		id  uint64
		res Result
	}
	out := make([]delivery, len(cmds))
	for i, cmd := range cmds {
		var req pb.InternalRaftRequest
		if err := proto.Unmarshal(cmd, &req); err != nil {
			out[i].res.Err = fmt.Errorf("mvcc: command at index %d cannot be decoded: %w", index, err)
			continue
		}
		out[i] = delivery{id: req.ID, res: m.applyRequest(&req)}
	}
	m.s.term.Store(term)
	m.advance(index)
	for _, d := range out {
		m.deliver(d.id, d.res)
	}
}

// Skip records an entry that carries no command (a configuration
// change) as applied at index, so that Applied reaches every index a
// read may wait for.
func (m *StateMachine) Skip(index, term uint64) {
	m.s.term.Store(term)
	m.advance(index)
}

// SetRecordRenewal makes RenewLease return only once record(id) made the
// renewal known to every member (kv commits a checkpoint of it), and
// fail with record's error. Call it before the first RenewLease.
func (m *StateMachine) SetRecordRenewal(record func(id int64) error) {
	m.recordRenewal = record
}

// ApplyLocal applies req at once as the next index, for a member alone
// (no consensus), and returns its result. Calls must not overlap, so that
// applied indexes follow apply order: the caller serialises them.
func (m *StateMachine) ApplyLocal(req *pb.InternalRaftRequest) Result {
	res := m.applyRequest(req)
	m.advance(m.Applied() + 1)
	return res
}

// applyRequest applies one decoded command to the store.
func (m *StateMachine) applyRequest(req *pb.InternalRaftRequest) Result {
	s := m.s
	if err := m.checkAuth(req); err != nil {
		return Result{Err: err, Rev: s.Rev()}
	}
	if s.NoSpace() && growsData(req) {
		return Result{Err: ErrNoSpace, Rev: s.Rev()}
	}
	switch {
	case req.Put != nil:
		resp, rev, err := s.put(req.Put)
		return Result{Resp: resp, Rev: rev, Err: err}
	case req.DeleteRange != nil:
		resp, rev, err := s.deleteRange(req.DeleteRange)
		return Result{Resp: resp, Rev: rev, Err: err}
	case req.Txn != nil:
		resp, rev, err := s.Txn(req.Txn)
		return Result{Resp: resp, Rev: rev, Err: err}
	case req.Compaction != nil:
		err := s.compact(req.Compaction.Revision)
		return Result{Resp: &pb.CompactionResponse{}, Rev: s.Rev(), Err: err}
	case req.LeaseGrant != nil:
		l, err := s.grant(req.LeaseGrant.ID, req.LeaseGrant.TTL)
		if err != nil {
			return Result{Err: err, Rev: s.Rev()}
		}
		return Result{Resp: &pb.LeaseGrantResponse{ID: l.id, TTL: l.ttl}, Rev: s.Rev()}
	case req.LeaseRevoke != nil:
		rev, err := s.revoke(req.LeaseRevoke.ID)
		if err != nil {
			rev = s.Rev()
		}
		return Result{Resp: &pb.LeaseRevokeResponse{}, Rev: rev, Err: err}
	case req.LeaseCheckpoint != nil:
		s.checkpoint(req.LeaseCheckpoint.Checkpoints)
		return Result{Rev: s.Rev()}
	case req.Alarm != nil:
		return Result{Resp: s.applyAlarm(req.Alarm), Rev: s.Rev()}
	case auth.IsCommand(req):
		resp, err := m.auth.Apply(req)
		return Result{Resp: resp, Rev: s.Rev(), Err: err}
	}
	return Result{Err: fmt.Errorf("mvcc: command %d carries no operation chute applies", req.ID), Rev: s.Rev()}
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
func (m *StateMachine) deliver(id uint64, res Result) {
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

// Register returns a new request id for a command this member proposes:
// the result of the command carrying it comes to ch (buffered, once)
// when this member applies it. cancel forgets the id; call it when done
// waiting.
func (m *StateMachine) Register() (id uint64, ch <-chan Result, cancel func()) {
	id = m.nextID.Add(1)
	if id == 0 {
		id = m.nextID.Add(1)
	}
	c := make(chan Result, 1)
	m.mu.Lock()
	m.waits[id] = c
	m.mu.Unlock()
	return id, c, func() {
		m.mu.Lock()
		delete(m.waits, id)
		m.mu.Unlock()
	}
}

// failWaiting ends every waiting request with err.
func (m *StateMachine) failWaiting(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, ch := range m.waits {
		ch <- Result{Err: err}
		delete(m.waits, id)
	}
}

// WaitApplied returns once index is applied, or with ctx's error when
// ctx ends first.
func (m *StateMachine) WaitApplied(ctx context.Context, index uint64) error {
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
	if err := m.recordRenewal(id); err != nil {
		return 0, err // not renewed: no TTL to report
	}
	return ttl, nil
}

// checkAuth checks again, at apply, a client's write that kv checked
// before proposing it, as etcd's apply does: the command's header names
// the user and the auth revision of that check (kv stamps it while auth
// is enabled). A put, delete, txn or lease revoke is refused with
// auth.ErrAuthOldRevision when an auth change was applied since, which
// may have taken the permission away (the client logs in again and
// retries, as clientv3 does); and a revoke, or a put with a lease, with
// auth.ErrPermissionDenied when the lease now holds a key the user may
// not write, attached since the check. Every member applies the same
// commands to the same auth state, so every member decides alike.
//
// A client's write kv let through with auth off carries an empty header
// (kv's writeClient): refused with auth.ErrUserEmpty once auth is on, as
// etcd refuses a request with no user at apply. The member's own writes
// carry no header and are not checked.
func (m *StateMachine) checkAuth(req *pb.InternalRaftRequest) error {
	h := req.Header
	if h == nil {
		return nil
	}
	if req.Put == nil && req.DeleteRange == nil && req.Txn == nil && req.LeaseRevoke == nil {
		return nil
	}
	if !m.auth.Enabled() {
		return nil
	}
	if h.AuthRevision == 0 {
		return auth.ErrUserEmpty
	}
	if h.AuthRevision < m.auth.Revision() {
		return auth.ErrAuthOldRevision
	}
	switch {
	case req.LeaseRevoke != nil:
		return m.checkLeaseKeys(h.Username, req.LeaseRevoke.ID)
	case req.Put != nil:
		return m.checkLeaseKeys(h.Username, req.Put.Lease)
	case req.Txn != nil:
		return m.checkTxnLeases(h.Username, req.Txn)
	}
	return nil
}

// checkTxnLeases checks write on the keys of the lease of every put in
// both branches of r, nested txns included.
func (m *StateMachine) checkTxnLeases(user string, r *pb.TxnRequest) error {
	for _, ops := range [][]*pb.RequestOp{r.Success, r.Failure} {
		for _, op := range ops {
			var err error
			switch o := op.Request.(type) {
			case *pb.RequestOp_RequestPut:
				err = m.checkLeaseKeys(user, o.RequestPut.Lease)
			case *pb.RequestOp_RequestTxn:
				err = m.checkTxnLeases(user, o.RequestTxn)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// checkLeaseKeys checks that user may write every key attached to lease
// id (LeaseKeysAllowed).
func (m *StateMachine) checkLeaseKeys(user string, id int64) error {
	return LeaseKeysAllowed(m.s, m.auth, user, id, auth.Write)
}

// LeaseKeysAllowed checks that user has access a on every key attached
// to lease id in s, by the permissions of as: kv's authorizer before a
// call, the apply after it. No lease (0, or one that does not exist)
// passes, for the call to answer.
func LeaseKeysAllowed(s *Store, as *auth.Store, user string, id int64, a auth.Access) error {
	if id == 0 {
		return nil
	}
	info, err := s.TimeToLive(id, true)
	if err != nil {
		return nil
	}
	for _, k := range info.Keys {
		if err := as.Check(user, k, nil, a); err != nil {
			return err
		}
	}
	return nil
}
