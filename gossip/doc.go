// Package gossip owns the cluster's membership over hashicorp/serf
// (membership.go, config.go, join.go, events.go), member ids (id.go) and
// the alive peers as other packages dial them (peers.go).
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
// The key space is not gossip's: it is replicated by raft (kv/raftkv),
// which learns the members and their raft tags from here (Members, Tags,
// SetTags, Subscribe). gossip/peer owns the node-to-node gRPC link that
// raft, the queues and the cluster status ride on; who may call, and how
// strangers are kept out, is gossip/peer's.
package gossip
