// Package gossip owns the cluster: membership over hashicorp/serf
// (membership.go, config.go, join.go, events.go), member ids (id.go), and the
// key-space replication, the Peer service of the peer link (gossip/peer,
// its protobufs in peer/peerpb), which is never served on the etcd client
// port (replicator.go, peer_link.go, peer_server.go).
//
// Membership: serf on --gossip-listen, seeds from --join retried with
// backoff until one answers, the cluster name as memberlist's label and a
// merge check so two clusters never merge, --gossip-key encryption, and
// tags carrying each member's peer URL, client URLs and version.
//
// Names are unique (names.go). What serf does with a duplicate, measured
// with serf v0.11.0: memberlist keeps the first address it saw for a name
// and rejects the other, and each node that finds its own name elsewhere
// asks the others where the name lives and shuts down when it gets no
// majority. A newcomer to a cluster of three loses 0 of 2 and stops; but
// when the newcomer joins a lone node under its name, neither has anybody
// to ask, both lose 0 of 0 and both stop. So serf's vote is off, and the
// merge delegate compares the "started" tags: the later node refuses the
// join and stops serf (without a leave, which would announce the other
// node's departure), the earlier one keeps running. A Membership whose
// serf stopped on its own, for this or any reason, closes Stopped; chute
// then exits non-zero.
//
// Replication (replicator.go, peer_link.go): every local KV change is sent
// to every alive member over one long-lived stream each, in batched frames
// from a bounded queue; a receiver applies a change only if its stamp
// (Lamport time, member id) is newer than the key's (kv/replica.go). Every
// DigestInterval each member compares per-bucket digests with each peer,
// pulls the buckets that differ and pushes its own, so changes dropped on a
// full queue, a broken stream or a frozen member are repaired, and a new
// link starts with a pull, so a joining or restarted member gets the whole
// key space. This is eventual consistency, not etcd's linearizability: two
// members may answer a read differently for the few milliseconds a change
// takes to travel.
//
// A peer is trusted to be a member, not to be correct. A replicated change
// no member could have made is refused, on a Replicate stream (which ends
// with the change's gRPC code) as in a pull: a stamp more than
// kv.MaxStampLead (2^32 µs, about 71 minutes) ahead of both the receiver's
// clock and its wall clock, a key or value over the client limits, a
// dispatcher record or queue settings a client's put would be refused.
// Adopting such a stamp would move every member's clock to the top of its
// range, where the next write would wrap to 0 and lose to every write
// before it. Stamps are hybrid (kv/stamp.go): a local write takes the
// later of the clock plus one and the wall clock in microseconds, so
// honest members' stamps stay within clock skew of each other however
// many writes the cluster made, and a member that just started can still
// judge them. A refusal is logged at WARN with the sender's member id,
// once a minute per peer. The other changes of a batch are applied.
//
// The Replicator owns no listener: Start registers the Peer service on the
// peer link's (gossip/peer's Server), next to dispatch's Queues service and
// raft's, and the links dial with peer.Dial and ReplicatorConfig.Credentials.
// Who may call, and how strangers are kept out, is gossip/peer's.
package gossip
