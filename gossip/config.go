package gossip

import (
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"
)

// ErrInvalidConfig is wrapped by every error Config.Validate returns.
var ErrInvalidConfig = errors.New("gossip: invalid config")

// Defaults of Config.
const (
	DefaultBindAddr       = "127.0.0.1:7946"
	DefaultJoinBackoffMin = 200 * time.Millisecond
	DefaultJoinBackoffMax = 10 * time.Second

	// maxNameLen is serf's limit on node names.
	maxNameLen = serf.MaxNodeNameLength
)

// Serf tag keys. Every chute node sets all of them; lists are comma-joined.
const (
	tagCluster = "cluster"
	tagID      = "id"
	tagPeer    = "peer"
	tagClient  = "client"
	tagVersion = "version"
	tagBoot    = "boot"
	tagStarted = "started" // Config.Started, Unix milliseconds
	tagLeaving = "leaving" // "1" once MarkLeaving was called; absent before
)

// ownTag reports whether k is one of chute's own tag names.
func ownTag(k string) bool {
	switch k {
	case tagCluster, tagID, tagPeer, tagClient, tagVersion, tagBoot, tagStarted, tagLeaving:
		return true
	}
	return false
}

// Config configures a Membership. The zero value is not valid: start from
// DefaultConfig and set Name and Cluster. Config is read by New only.
type Config struct {
	// Name is the node's name, unique in the cluster; the member id is
	// MemberID(Name). Required: at most 128 bytes of printable UTF-8 with no
	// spaces and no '/'.
	Name string

	// Cluster is the cluster's name. Required, at most 255 bytes. It is
	// memberlist's Label, so every packet and stream carries it and a node
	// drops traffic labelled with another cluster; a serf merge delegate
	// also refuses members whose "cluster" tag differs. Two clusters never
	// merge.
	Cluster string

	// BindAddr is the host:port serf listens on, TCP and UDP. Required. The
	// host is an IP address, a DNS name (resolved once by New; IPv4
	// preferred) or empty for every interface. Port 0 is refused: serf
	// binds TCP and UDP separately, and a node whose port is chosen by the
	// kernel cannot be named as anybody's seed.
	BindAddr string

	// AdvertiseAddr is the host:port other nodes use to reach this one
	// (host: IP address or DNS name resolved once by New). Empty: BindAddr.
	// When the resulting host is unspecified (0.0.0.0 or ::), memberlist
	// advertises the first private IP address of the machine, and New
	// fails when there is none.
	AdvertiseAddr string

	// Join lists seeds as host:port; a host may be a DNS name, and every
	// address it resolves to is tried. Start retries them with backoff
	// until one answers (see Membership.Joined). Seeds equal to BindAddr or
	// AdvertiseAddr are skipped. Empty: this node waits to be joined.
	Join []string

	// JoinBackoffMin and JoinBackoffMax bound the pause between two rounds
	// of join attempts: it starts at JoinBackoffMin, doubles after every
	// failed round up to JoinBackoffMax, and is jittered down by up to a
	// half. Zero: DefaultJoinBackoffMin, DefaultJoinBackoffMax.
	JoinBackoffMin, JoinBackoffMax time.Duration

	// Key is the AES key (16, 24 or 32 bytes) that encrypts and
	// authenticates gossip. Empty: no encryption; such a node can neither
	// join nor be joined by an encrypted one.
	Key []byte

	// PeerURLs and ClientURLs are published in the serf tags "peer" and
	// "client", comma-joined, so no URL may contain a comma. Empty: the
	// tag is empty.
	PeerURLs, ClientURLs []string

	// Version is published in the serf tag "version". Empty: empty.
	Version string

	// Boot identifies this run of the process, published in the serf tag
	// "boot": a member restarted under the same name has a new one, so the
	// others can tell it lost what it held in memory even when serf never
	// saw it fail. Empty: New picks a random one.
	Boot string

	// Started is when this run began, published in the serf tag
	// "started". Of two nodes that claim one name at different addresses,
	// the one that started later stops (see nameGuard). Zero: New uses
	// the time it is called.
	Started time.Time

	// Tags are serf tags the node starts with, besides its own (cluster,
	// id, peer, client, version, boot, started), until SetTags replaces
	// them: what others must see from its first gossip on. None may be
	// one of its own. Nil: none.
	Tags map[string]string
	// ReserveTags are the largest tags the node publishes later by
	// SetTags (raft's), counted by Validate beside its own and Tags, so
	// that URLs leaving them no room within serf's limit are refused at
	// start, not when they are published. Not published. Nil: none.
	ReserveTags map[string]string

	// Fast selects timings for in-process tests on loopback: a killed node
	// is reported failed after about 0.5s instead of 5-7s (3 nodes), and a
	// graceful leave takes about 0.2s instead of 1s. Details in fastTimings
	// and lanTimings. False: LAN timings.
	Fast bool

	// Logger receives the membership's logs and serf's and memberlist's,
	// each line at the level of its "[LEVEL]" prefix. Nil: discarded.
	Logger *slog.Logger
}

// DefaultConfig returns LAN timings, BindAddr DefaultBindAddr and the
// default join backoff. Name and Cluster are left empty.
func DefaultConfig() Config {
	return Config{
		BindAddr:       DefaultBindAddr,
		JoinBackoffMin: DefaultJoinBackoffMin,
		JoinBackoffMax: DefaultJoinBackoffMax,
	}
}

// checkNodeName accepts what serf and memberlist can carry and what our
// logs and seeds ("name/addr" is memberlist's seed syntax) can show.
func checkNodeName(name string) error {
	switch {
	case name == "":
		return errors.New("must not be empty")
	case len(name) > maxNameLen:
		return fmt.Errorf("%d bytes, more than %d", len(name), maxNameLen)
	case !utf8.ValidString(name):
		return errors.New("not UTF-8")
	case strings.Contains(name, "/"):
		return errors.New("contains '/'")
	}
	for _, r := range name {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return fmt.Errorf("contains %q", r)
		}
	}
	return nil
}

// splitGossipAddr splits host:port and checks the port (1-65535). The host
// may be empty only when emptyHost is true (a bind address).
func splitGossipAddr(addr string, emptyHost bool) (host string, port int, err error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, errors.New("want host:port")
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("port %q is not a number from 1 to 65535", p)
	}
	if n == 0 {
		return "", 0, errors.New("port 0 is not supported: serf needs a fixed port for TCP and UDP that seeds can name")
	}
	if host == "" && !emptyHost {
		return "", 0, errors.New("host is empty")
	}
	return host, int(n), nil
}

func (c Config) joinBackoff() (lo, hi time.Duration) {
	lo, hi = c.JoinBackoffMin, c.JoinBackoffMax
	if lo == 0 {
		lo = DefaultJoinBackoffMin
	}
	if hi == 0 {
		hi = max(DefaultJoinBackoffMax, lo)
	}
	return lo, hi
}

// tags are the serf tags of the node c describes.
func (c Config) tags() map[string]string {
	return map[string]string{
		tagCluster: c.Cluster,
		tagID:      strconv.FormatUint(MemberID(c.Name), 16),
		tagPeer:    strings.Join(c.PeerURLs, ","),
		tagClient:  strings.Join(c.ClientURLs, ","),
		tagVersion: c.Version,
		tagBoot:    c.Boot,
		tagStarted: strconv.FormatInt(c.Started.UnixMilli(), 10),
	}
}

// startTags are the tags the node starts with: Tags and its own.
func (c Config) startTags() map[string]string {
	tags := c.tags()
	for k, v := range c.Tags {
		if !ownTag(k) {
			tags[k] = v
		}
	}
	return tags
}

// tagsSize is an upper bound of the size of serf's encoding of tags: a
// magic byte, then a msgpack map of strings (at most 3 bytes of header per
// map and per string).
func tagsSize(tags map[string]string) int {
	n := 1 + 3
	for k, v := range tags {
		n += 3 + len(k) + 3 + len(v)
	}
	return n
}

// fastTimings tunes sc for in-process tests on loopback.
//
// memberlist (from DefaultLocalConfig): ProbeInterval 100ms, ProbeTimeout
// 50ms, SuspicionMult 2, GossipInterval 20ms, PushPullInterval 2s. With
// SuspicionMult 2 memberlist expects no confirmations (k = SuspicionMult-2
// = 0), so a suspect is declared dead after SuspicionMult *
// max(1, log10(N)) * ProbeInterval = 200ms for clusters below 10 nodes.
// A dead node is first probed within about (N-1) probe intervals, and a
// probe fails after one probe interval (direct, indirect and TCP tries),
// so a killed node is reported failed 0.3-0.6s after it dies in a 3-node
// cluster (about 0.5s measured by the membership tests under -race).
//
// Broadcasts are retransmitted, and probes relayed through other members,
// as with LAN timings (RetransmitMult 4, IndirectChecks 3).
//
// serf: reap every 500ms, failed members reconnected every 500ms and
// forgotten (EventReap) after 10s, left members kept 10s, leave broadcast
// bounded by 1s plus a 200ms propagation delay.
func fastTimings(sc *serf.Config) {
	ml := memberlist.DefaultLocalConfig()
	ml.ProbeInterval = 100 * time.Millisecond
	ml.ProbeTimeout = 50 * time.Millisecond
	ml.SuspicionMult = 2
	ml.GossipInterval = 20 * time.Millisecond
	ml.PushPullInterval = 2 * time.Second
	ml.GossipToTheDeadTime = 2 * time.Second
	ml.DeadNodeReclaimTime = time.Second
	// DefaultLocalConfig asks 1 member to relay a probe that got no
	// direct ack, and memberlist draws relays at random, 3*n draws over
	// all n members (itself and the target included) unless n < 3 *
	// IndirectChecks. In 3 nodes the one candidate is missed (2/3)^9 =
	// 2.6% of the time: no relay is asked, and a node cut off from the
	// prober alone is suspected every few seconds, and failed when its
	// refutation through the third node takes over the 200ms suspicion
	// timeout. LAN's 3 makes the search exhaustive below 9 nodes.
	ml.IndirectChecks = 3
	// DefaultLocalConfig's 2 sends a broadcast 2 * ceil(log10(N+1))
	// times: in three nodes with one dead, once to the dead one and
	// once to the only other. That one packet lost under make test's
	// load, a graceful leave was reported "failed" (CI). LAN's 4 sends
	// each of them two copies.
	ml.RetransmitMult = 4
	sc.MemberlistConfig = ml

	sc.ReapInterval = 500 * time.Millisecond
	sc.ReconnectInterval = 500 * time.Millisecond
	sc.ReconnectTimeout = 10 * time.Second
	sc.TombstoneTimeout = 10 * time.Second
	sc.BroadcastTimeout = time.Second
	sc.LeavePropagateDelay = 200 * time.Millisecond
}

// lanTimings are serf's and memberlist's LAN defaults: probe every 1s with
// a 500ms timeout, SuspicionMult 4, gossip every 200ms, full state sync
// every 30s; failed members are reconnected every 30s and forgotten after
// 24h, left members kept 24h. A killed node is reported failed after the
// suspicion timeout, SuspicionMult * max(1, log10(N)) * ProbeInterval = 4s
// below 10 nodes (8s at 100), plus the time to probe it and fail (1-3s):
// about 5-7s. From 4 nodes on, memberlist waits for 2 independent
// confirmations and, without them, up to SuspicionMaxTimeoutMult (6) times
// the suspicion timeout: 24s.
func lanTimings(sc *serf.Config) {
	ml := memberlist.DefaultLANConfig()
	// A node that comes back on another address (a rescheduled pod)
	// may reclaim its name 30s after it was declared dead.
	ml.DeadNodeReclaimTime = 30 * time.Second
	sc.MemberlistConfig = ml
}

// resolvedAddr is an address whose host is an IP literal (or empty).
type resolvedAddr struct {
	host string
	port int
}

// serfConfig builds serf's configuration from c, whose addresses New has
// resolved; serf sends its events to events and logs to logger.
func (c Config) serfConfig(bind, advertise resolvedAddr, events chan<- serf.Event, names *nameGuard, logger *log.Logger) *serf.Config {
	sc := serf.DefaultConfig()
	if c.Fast {
		fastTimings(sc)
	} else {
		lanTimings(sc)
	}
	sc.NodeName = c.Name
	sc.Tags = c.startTags()
	sc.EventCh = events
	sc.LogOutput = nil
	sc.Logger = logger
	sc.Merge = mergeChecks{cluster: clusterMerge{cluster: c.Cluster}, names: names}
	// Coordinates (RTT estimates) cost ping bytes and nobody reads them.
	sc.DisableCoordinates = true
	// serf's own vote on a name conflict asks the other members where
	// the name lives; with no other member to answer, both nodes lose and
	// shut down, so a misconfigured newcomer takes a running node down
	// with it. nameGuard decides instead.
	sc.EnableNameConflictResolution = false

	ml := sc.MemberlistConfig
	ml.Logger = logger
	ml.LogOutput = nil
	ml.Label = c.Cluster
	ml.BindAddr = bind.host
	if ml.BindAddr == "" {
		ml.BindAddr = "0.0.0.0"
	}
	ml.BindPort = bind.port
	ml.AdvertiseAddr = advertise.host
	ml.AdvertisePort = advertise.port
	if len(c.Key) > 0 {
		ml.SecretKey = append([]byte(nil), c.Key...)
	}
	return sc
}
