package gossip

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/serf/serf"
)

// ErrNameConflict is wrapped by Err when this node stopped because another
// node, started earlier, uses its name.
var ErrNameConflict = errors.New("gossip: another node uses this name")

// mergeChecks is serf's merge delegate: the cluster check, then the name
// check. serf calls it with the remote member list of every join (ours
// and others'), and with the member of every alive message.
type mergeChecks struct {
	cluster clusterMerge
	names   *nameGuard
}

var _ serf.MergeDelegate = mergeChecks{}

func (d mergeChecks) NotifyMerge(members []*serf.Member) error {
	if err := d.cluster.NotifyMerge(members); err != nil {
		return err
	}
	return d.names.check(members)
}

// nameGuard finds another node that uses our name. memberlist keeps the
// first address it saw for a name and rejects the other one, so neither
// node appears twice in anybody's member list; what reaches the merge
// delegate is the only trace. A member named like us counts when it is at
// another address (at ours it is this node, or its previous run) and has
// not left (memberlist hands a left name to the next claimant). Of the
// two, the one with the later "started" tag yields (equal: the greater
// "boot"; none: we are newer), so both sides agree on one loser. Its join
// is refused and yield is called; the other node only logs.
//
// The merge delegate does not say whether the member is alive or dead:
// a node restarted at another address while its previous run is still
// listed dead (memberlist's GossipToTheDeadTime) yields as well, as it
// would have lost serf's vote. Wall clocks of two machines skewed by more
// than the time between the two starts make the older node the loser.
type nameGuard struct {
	name, boot string
	started    int64 // Unix ms, our "started" tag
	log        *slog.Logger
	yield      func(error) // must not block; called at every sighting

	self atomic.Pointer[string] // our gossip host:port; nil until bound

	mu     sync.Mutex // guards warned
	warned string     // boot of the last newer claimant logged
}

// bound sets our own gossip address, as serf advertises it. Until then
// check finds nothing.
func (g *nameGuard) bound(addr string) {
	g.self.Store(&addr)
}

// check returns an error wrapping ErrNameConflict, after calling yield,
// when members holds an older claimant of our name.
func (g *nameGuard) check(members []*serf.Member) error {
	self := g.self.Load()
	if self == nil {
		return nil
	}
	for _, sm := range members {
		if sm.Name != g.name || sm.Status == serf.StatusLeft {
			continue
		}
		addr := net.JoinHostPort(sm.Addr.String(), strconv.Itoa(int(sm.Port)))
		if addr == *self {
			continue
		}
		boot := sm.Tags[tagBoot]
		if !g.yields(sm.Tags) {
			g.warnNewer(addr, boot)
			continue
		}
		err := fmt.Errorf("%w: %q is already used by the node at %s (boot %s), which started first",
			ErrNameConflict, g.name, addr, boot)
		g.yield(err)
		return err
	}
	return nil
}

// yields reports whether we are the newer of us and the claimant tagged
// tags.
func (g *nameGuard) yields(tags map[string]string) bool {
	started, err := strconv.ParseInt(tags[tagStarted], 10, 64)
	switch {
	case err != nil:
		return true // a node without the tag predates it: it was first
	case started != g.started:
		return started < g.started
	default:
		return tags[tagBoot] < g.boot
	}
}

// warnNewer logs, once per claimant, that a newer node uses our name.
func (g *nameGuard) warnNewer(addr, boot string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.warned == boot {
		return
	}
	g.warned = boot
	g.log.Warn("a newer node uses this name; it will stop", "name", g.name, "addr", addr, "boot", boot)
}
