// Package mvcc is chute's key space: an in-memory multi-version store of
// etcd's data model (keys with revisions, leases, watches), and the
// StateMachine that applies the commands of the log to it, in order, on
// every member. It knows nothing of gRPC servers or of raft: kv serves
// the etcd API over it and proposes the commands, kv/raftkv drives the
// StateMachine from raft's log.
//
// # Store
//
// Every write that changes something takes the next revision; a txn is one
// revision however many keys it writes. A fresh store is at revision 1, so
// the first put is revision 2, as in etcd. Each key keeps all its revisions
// (value, create_revision, mod_revision, version, lease) until compaction;
// a delete writes a tombstone that ends the key's generation, and the next
// put starts a new one at version 1. Reads at an old revision see the key as
// it was; reads below the compaction revision fail with ErrCompacted, above
// the current one with ErrFutureRev. Compaction is explicit (a Compaction
// command) or automatic: when 2×HistoryRevisions revisions have accumulated
// the store compacts down to HistoryRevisions, by itself for a member
// alone, through a command the leader proposes with a consensus
// (CompactionDue), so that every member compacts at the same revision.
//
// Writes come only through the StateMachine. Apply is deterministic: it
// reads only the store and the command, so every member that applies the
// same log holds the same key space at the same revisions.
//
// # Watches
//
// A watcher is synced (fed by each write while the write holds the lock) or
// unsynced (fed from the change log by the sync loop, RunWatchLoops).
// Feeding never blocks: a watcher pushes to its WatchSink, the bounded
// send queue of its stream, and a watcher whose sink is full becomes
// unsynced at the revision it missed and catches up from the log once its
// client reads again. So a stuck client costs at most its queue and never
// slows writes or other watchers. A watcher whose position was compacted
// away is cancelled with compact_revision, as etcd does.
//
// # Leases
//
// Leases live in the store: granted and revoked by commands, their keys
// deleted in one revision when they are revoked or expire. With a
// consensus the leader keeps the deadlines (StateMachine.RenewLease),
// checkpoints them through the log and proposes the revoke of expired
// leases; a member alone expires them itself (ExpireLeases).
//
// # Alarms
//
// Alarms (etcd's NOSPACE) are replicated state too: raised and disarmed
// by Alarm commands, kept in snapshots. While a NOSPACE alarm is raised,
// Apply refuses with ErrNoSpace every command that grows the data (a put,
// a txn with a put, a lease grant) and applies the rest, so that space
// can be freed and the alarm disarmed (alarm.go).
//
// # Auth
//
// etcd's users, roles and permissions are replicated state as well: the
// auth commands of the log (AuthEnable, UserAdd, RoleGrantPermission, ...)
// change the StateMachine's auth.Store (kv/auth) in order on every
// member, and snapshots carry it. It is never visible as keys.
//
// # Locks
//
// One RWMutex, Store.mu, guards the whole store: keys, revisions, change
// log, leases, alarms and the watcher registry, with each watcher's
// position.
// Writes are short: a B-tree update and an append. A WatchSink is called
// with Store.mu held, so a sink takes only its own lock and never calls
// the store; a caller that holds a lock of its own while it registers or
// removes watchers (kv's watch stream) takes it before Store.mu. The
// order is: the caller's lock, Store.mu, the sink's lock.
// The auth store has its own lock, never held together with Store.mu.
// StateMachine.mu guards the requests waiting for their command and the
// reads waiting for an index; it is never held together with Store.mu.
package mvcc
