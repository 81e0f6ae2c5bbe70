// Package kv is chute's etcd: an in-memory MVCC key space and the etcd v3
// gRPC services over it (KV, Watch, Lease, Maintenance, Cluster), served on
// every client URL.
//
// http:// and https:// client URLs share one gRPC server, as in etcd: the
// listeners of https:// URLs mark their connections, and the server's
// credentials (mixedCredentials) run the TLS handshake, with the
// certificate and client verification of Config.TLS, on marked ones only.
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
// the current one with ErrFutureRev. Compaction is explicit (Compact) or
// automatic: when 2×HistoryRevisions revisions have accumulated the store
// compacts down to HistoryRevisions.
//
// One RWMutex guards the whole store (keys, revisions, change log, leases,
// watcher registry). Writes are short: a B-tree update and an append.
//
// # Watches
//
// A watcher is synced (fed by each write while the write holds the lock) or
// unsynced (fed from the change log by the sync loop). Feeding never blocks:
// each watch stream has a bounded send queue, and a watcher whose queue is
// full becomes unsynced at the revision it missed and catches up from the
// log once its client reads again. So a stuck client costs at most its
// queue and never slows writes or other watchers. A watcher whose position
// was compacted away is cancelled with compact_revision, as etcd does.
// Watch ids are assigned by the server per stream from 0, as etcd does.
//
// # Leases
//
// Leases live on the node that granted them. TTLs below MinLeaseTTL are
// raised to it (etcd: 2 s with its default timings); expired leases are
// revoked by a timer, deleting their keys in one revision with DELETE
// events. KeepAlive on a lease that is gone answers TTL 0, TimeToLive answers
// TTL -1, as etcd does.
//
// # Where chute differs from etcd
//
//   - Keys are limited to MaxKeyBytes (1 KiB by default): a longer key is
//     InvalidArgument "etcdserver: key is too large". etcd has no such limit.
//   - Status reports this member as the leader, raft_index is the store
//     revision, raft_term a counter that only grows, and version is
//     APIVersion, the etcd API level chute answers as.
//   - Hash and HashKV hash keys and values only (CRC-32C in key order), not
//     revisions, so two members holding the same data report the same hash.
//   - Snapshot is a bbolt file in etcd's backend layout (key and meta
//     buckets) followed by its SHA-256, so etcdctl can save and inspect it;
//     it carries no raft membership.
//   - Membership comes from gossip: MemberAdd, MemberRemove, MemberUpdate and
//     MemberPromote are refused with a message explaining --join.
//   - Auth, Lock and Election services are not served; the clientv3
//     concurrency recipes (Mutex, Election) work on KV, Lease and Watch.
//   - Nothing is persisted: a node that restarts starts empty.
package kv
