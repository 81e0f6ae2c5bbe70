// Package raftkv is kv.Consensus over hashicorp/raft (Consul's model):
// every key-space write is a raft log entry that every member applies in
// order to its StateMachine; a follower forwards what only the leader
// can do to the leader, over the peer link. kv never imports raft: it
// hands this package a StateMachine and gets a Consensus.
//
// # State machine
//
// NewFSM adapts a StateMachine to raft.FSM: command entries go to Apply
// with their index and term (raft hands an FSM nothing else), snapshots
// are captured on raft's FSM goroutine and written later by Persist,
// which closes the sink or cancels it on a failed write, and Restore
// closes raft's reader whatever happens. StateMachine.Applied is the
// index kv waits for on reads; it is kept inside the snapshot, since
// raft tells Restore no index, and is always a command's index so that
// every member reaches it.
//
// # Routing
//
// Propose, ReadIndex and RenewLease run on this member's raft when it
// leads, and otherwise as the KV peer service's call
// (gossip/peer/peerpb/kv.proto) on the leader: its raft address is its
// peer listener, dialed once with Config.DialOptions and kept until
// Close, every call carrying the cluster and member ids. A member that
// serves the service without leading answers etcd's "not leader" and
// never forwards again, so a call crosses the link at most once per try.
// A follower's proposals share calls (group commit, as etcd's proposals
// share raft messages): the commands proposed while earlier calls are on
// the way go together in the next call, at most maxInFlight calls to a
// leader at a time, each of at most maxBatchCommands commands and
// maxBatchBytes; the leader applies them in order and answers each its
// own result, mapped back as a whole call's error would be.
// The leader packs what it applies, its own members' commands and the
// forwarded ones, into shared log entries (pack.go): while
// maxEntriesInFlight entries are on their way through raft, the
// commands that arrive go together in the next one, which every member
// applies whole at the entry's index: StateMachine.Applied reaches the
// index only after its last command, so a read never runs between two.
// A try that finds the leader gone (raft's not-leader or transfer in
// progress; a leader answering "not leader" or "stopped"; a connection
// that fails with Unavailable) is tried again after a backoff, on
// whoever leads then, up to ten tries. So is a read or a renewal the
// leader has not answered within Config.TryTimeout: a frozen leader
// keeps its connections open, and would hold every keep-alive of a
// follower's clients past their leases' TTL, long after the others
// elected a leader that would answer. A command the leader appended
// and then lost with its leadership (raft's leadership lost) is not:
// it may still commit under the next leader, and a second copy could
// apply after writes acknowledged meanwhile (a delete tried twice would
// remove a put made between the two). Propose answers it
// kv.ErrLeaderChanged, and kv waits for its own apply of the command
// for a while. Reads and renewals, which may run twice, are tried again
// in that case too. So is a forwarded call that broke after it was
// sent (refusedUnsent): only a call the leader refused ("not leader")
// or whose connection was never made is tried again, since the leader
// may have applied the others. While raft knows no leader a try polls
// for one. Every call is bounded by its
// context and by Config.ApplyTimeout together: the time running out with
// no leader to serve the call is kv.ErrNoLeader, and otherwise
// kv.ErrTimeout; the caller's own context ending is its error.
//
// ProposeAsLeader, for the leader's own duties (lease revokes and
// checkpoints, compaction), never routes: its command goes into this
// member's apply queue bound to the term kv decided it in, and the
// applier drops it, answering kv.ErrNotLeader, unless raft leads in that
// term right before the entry is handed to raft. A leader resumed after
// a freeze, whose lease deadlines went stale meanwhile, then cannot
// revoke a lease another leader kept alive: etcd's old leaders could,
// by forwarding the revoke to the new one.
//
// The leader answers with etcd's gRPC errors (rpctypes.ErrGRPCNotLeader,
// ErrGRPCTimeout, ErrGRPCNoLeader, ErrGRPCLeaseNotFound,
// ErrGRPCStopped), which the follower maps back to kv's sentinels; any
// other status passes through unchanged. A forwarded command is bounded
// by Config.MaxCommandBytes, as client input is, and refused with
// InvalidArgument; Propose refuses it before sending, with
// ErrCommandTooLarge, wherever it is called.
//
// # Reads and leadership
//
// The leader serves ReadIndex as etcd does: it reads its commit index,
// has a majority confirm with a round of heartbeats that it still leads
// (raft's VerifyLeader: nothing is written), and hands out that index,
// which the caller waits for on its own StateMachine. Until the term's
// barrier (below) has committed, a read takes a barrier instead: an
// entry that commits through a quorum in the leader's term and returns
// once the FSM applied every entry before it. The index handed out is
// always one every StateMachine reaches (read.go says why). Concurrent
// reads are coalesced: one loop goroutine issues one check at a time,
// for every caller that joined the pending batch before the loop took
// it; callers that come while it runs make up the next batch.
//
// The same loop commits a barrier whenever this member leads without
// having done so in the current term (woken by raft's state-change
// observations and every readyRetry), and records the term it read
// before issuing it. Status.IsLeader holds only when raft leads and that
// term is the current one: the StateMachine then holds every entry of
// earlier terms, so lease deadlines are the cluster's. RenewLease on a
// leader waits for such a barrier first, for the same reason.
// TransferLeader, on the leader only, hands the leadership to the voter
// whose server id starts with the member id (kv/raftnode's server ids).
//
// Status reads raft's atomics and the leader under raft's read lock; it
// builds nothing, as kv calls it on every lease check.
//
// # Concurrency
//
// Every method is safe for concurrent use. New starts the loop; raft's
// futures have no channel, so a wait for one that must also watch a
// context runs on a goroutine of its own (awaitFuture), which ends when
// raft answers: raft answers every future, committing it, failing it
// when the leadership is lost (a leader cut off from its quorum steps
// down within LeaderLeaseTimeout) or when it shuts down. Close closes
// stop, which ends every caller's wait with kv.ErrStopped, deregisters
// the observer, closes the connections and waits (sync.WaitGroup) for
// the loop and those goroutines, so it may wait for raft that long;
// close the Consensus before raft shuts down. readMu guards the pending
// read batch and mu the connections and the closed flag; neither is
// held while taking the other, or while waiting for raft or the network.
package raftkv
