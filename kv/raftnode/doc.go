// Package raftnode is the raft node of a chute member (hashicorp/raft,
// Consul's model: serf tells who is there, raft orders the state): its
// stores under the data dir, the bootstrap of a new cluster, and the
// leader keeping raft's configuration in line with the members. The
// state machine is the caller's (Config.FSM); raft's RPCs travel on
// Config.Transport (kv/raftpeer over the peer link).
//
// # Stores
//
// Config.Dir/raft holds the log and the stable store (term, vote and the
// server id) in raft.db (raft-boltdb, the log behind a 512-entry
// raft.LogCache), and snapshots/, a raft.FileSnapshotStore keeping
// Config.SnapshotRetain snapshots. A node restarted on its data dir
// takes up its log, term and configuration; it never bootstraps again.
// raft.db is opened first, with a 1 s timeout on its file lock, so a
// second process on the same data dir fails there.
//
// For a while the log was in hashicorp/raft-wal (wal/), which spent a
// third less CPU per key-space write on three members (178-206 against
// 265-278 µs per put: bbolt commits a batch with two fdatasyncs and a
// rewrite of its B+tree pages, raft-wal appends it and fdatasyncs once).
// But raft-wal v0.4.0, its latest release, seals a segment without its
// index when raft deletes a suffix of the log (a leader killed or frozen
// with entries not committed rejoins, and the next leader replaces them;
// hashicorp/raft-wal#31, fixed only after that release), and cannot read
// that segment again: the node panicked at its next start, for good.
// Correct over fast: the log is back in raft.db, and queue puts, the
// bulk of the traffic, do not go through raft. A data dir with wal/ has
// its log moved back at the first open (moveWAL), read by scanning the
// segments' committed frames within the bounds raft-wal's meta store
// gives each, which needs no index: a segment sealed without one moves
// too.

// # Server ids
//
// A server id is the member id (gossip.ID, 16 hex digits), a dash and 8
// random hex digits minted when the stable store is created and kept in
// it. A wiped data dir is thus a new server, even for the same member
// name: it cannot vote twice in a term it forgot, and the leader
// replaces the old server (see Reconcile). raft sends to an address and
// counts the answer as the server it meant, so New tells a transport
// that can check (raftpeer.Transport.SetLocalID) which server it is:
// the requests for the old server, at the same address, are refused,
// not answered with none of its votes or log.
//
// # Tags
//
// A member publishes, as serf tags, TagServerID (its server id),
// TagState ("1" once it has raft state: from its data dir, a bootstrap or
// a leader's entries; "0" without, once its seeds answered and it sees
// no member with raft state; "?" until then) and TagExpect (its
// BootstrapExpect), and TagCluster (its raft cluster id, once it has
// one: cluster.go): Node.Tags, and Config.TagsChanged when they change.
// Members without TagServerID take no part in raft.
//
// # Bootstrap
//
// A node without raft state bootstraps when all of these hold: its seeds
// have answered (MemberSource.Joined: a node with seeds never bootstraps
// alone); no alive member has raft state (otherwise a cluster exists and
// its leader adds this node) or says "?": still opening its raft stores
// (PendingTags, which a member publishes from its first gossip until its
// Node's tags replace them: it may have state, and a member whose data
// dir is gone, started with the others, must not bootstrap alone), or
// still waiting for its own seeds (which may hold a cluster: a node
// that joined such a member sees it alone and would otherwise bootstrap
// a second cluster, whose log shares indexes and terms with the first's
// and hides its first entries); every alive member with a server id has
// the same expect; and there are at least BootstrapExpect of them. The
// configuration is the BootstrapExpect lowest server ids (the first
// Voters voters, the rest non-voters), and only a node in it bootstraps:
// every node computes the same set from the same members, so they agree
// whichever goes first, in any start order. A lone node with the
// default expect of 1 and no seeds bootstraps itself at once. Start at
// most BootstrapExpect new members at once: with more, two that see
// different members may pick different sets; the others join once the
// cluster exists.
//
// # Reconcile
//
// The loop runs at every Changed signal, every ReconcileInterval, when
// the node is elected and when its raft cluster id is set; on the leader
// each round makes one configuration change, passing the configuration's
// index so raft refuses it if another came in between, and waits at most
// ChangeTimeout; after a change the next round follows at once (at most
// maxChangesPerWake). In order: remove a server that left, that a new
// server replaced at its address, that has been failed (or forgotten by
// serf) for DeadServerGrace, or that says it is in another raft cluster;
// promote an alive non-voter that took this cluster's id while there are
// fewer than Voters voters; add an alive member not in the configuration
// (a voter while fewer than Voters if it has this cluster's id, else a
// non-voter; never a member of another raft cluster: planChange), or
// re-add one whose address changed. The leader never removes itself and
// never demotes. Every node notes since when each
// server has not been alive, so a new leader does not start the grace
// period over.
//
// DeadServerGrace defaults to one minute: longer than serf's failure
// detection and a process restart, so a restarting member keeps its
// vote, short enough that a three-voter cluster soon tolerates a failure
// again.
//
// # Next: wiring, reads, forwarding, recovery
//
// cmd/chute will open the Node before gossip starts (its tags go into
// gossip's), adapt gossip.Membership to MemberSource (Alive and failed
// members with their tags, Joined, a coalescing Changed fed by
// Subscribe), publish TagsChanged with serf's SetTags, and on a graceful
// stop transfer leadership and remove itself before Shutdown. The key
// space's FSM applies commands from Raft().Apply on the leader;
// followers forward writes to the leader over the peer link.
// Linearizable reads wait for Raft().VerifyLeader (or a Barrier on a new
// leader) and for the FSM to reach the commit index. --force-new-cluster
// will call raft.RecoverCluster on the stores before New, with this node
// alone as the configuration.
//
// # Concurrency
//
// New starts raft (raft's goroutines are raft's; Shutdown stops them).
// Start starts the one loop goroutine; it owns the failure notes and is
// the only caller of MemberSource's methods, BootstrapCluster and the
// configuration changes. Node's other methods are safe for concurrent
// use: hasState is atomic, the rest is fixed after New. There is no
// mutex, hence no lock order. Shutdown closes stop, shuts raft down,
// waits for the loop (sync.WaitGroup) and closes the stores.
package raftnode
