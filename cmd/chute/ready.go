package main

import (
	"strings"
	"sync/atomic"
)

// readiness decides /readyz: whether the node should take clients'
// traffic, and if not, what it lacks. A node is ready when it serves the
// etcd API, its gossip runs, and it has joined the cluster and caught up
// with its key space: a raft leader is known and this member applied
// every entry it knows committed. A node with no seed but itself starts
// the cluster, and one started with --force-new-cluster is the cluster:
// either is joined by definition, and caught up once it leads (or
// follows) and applied its log.
//
// Joined and caught up are conditions of the start: once both held they
// are not asked again, so a node whose peers come and go does not flap.
// The etcd API and gossip are asked every time, so readiness ends when
// gossip stops on its own; it ends as shutdown begins (leaving).
type readiness struct {
	serving    func() bool // the etcd API serves
	stopped    func() bool // gossip stopped on its own
	selfSeeded func() bool // no seed but this node, or forced into a cluster of one
	joined     func() bool // a seed answered, or another member is alive
	caughtUp   func() bool // a leader is known and the log applied up to the commit index

	synced atomic.Bool // joined and caught up held once
	// leaving is set when shutdown begins: load balancers and gRPC
	// health checks send clients elsewhere while the node hands its
	// queues over and leaves.
	leaving atomic.Bool
}

// missing returns what keeps the node from being ready, in a fixed
// order; none when it is ready.
func (r *readiness) missing() []string {
	var out []string
	if r.leaving.Load() {
		out = append(out, "shutting down")
	}
	if !r.serving() {
		out = append(out, "etcd API not serving")
	}
	if r.stopped() {
		out = append(out, "gossip stopped")
	}
	if !r.synced.Load() {
		joined := r.selfSeeded() || r.joined()
		caughtUp := r.caughtUp()
		if !joined {
			out = append(out, "gossip not joined")
		}
		if !caughtUp {
			out = append(out, "key space not caught up")
		}
		if joined && caughtUp {
			r.synced.Store(true)
		}
	}
	return out
}

// reason is the body of a 503 from /readyz.
func reason(missing []string) string {
	return "not ready: " + strings.Join(missing, "; ") + "\n"
}

// newReadiness asks the node's parts; they exist once newNode made them.
func (n *node) newReadiness() *readiness {
	return &readiness{
		serving: n.kv.Ready,
		stopped: func() bool { return gossipStopped(n.members) },
		// A node forced into a cluster of one (--force-new-cluster) is
		// the cluster, whatever its --join names (the dead members).
		selfSeeded: func() bool { return n.members.SelfSeeded() || n.keySpace.node.Forced() },
		joined: func() bool {
			return isClosed(n.members.Joined()) || len(n.members.Alive()) > 1
		},
		caughtUp: n.keySpace.caughtUp,
	}
}

// isClosed reports whether ch is closed, without waiting.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
