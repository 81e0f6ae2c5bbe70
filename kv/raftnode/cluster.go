package raftnode

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// The raft cluster id names the bootstrap a member's raft state comes
// from. The cluster name (--cluster) keeps other clusters' gossip out,
// but two raft clusters can share it: members bootstrapped apart (a
// --bootstrap-expect too low, two sites started alike) and later joined
// by gossip. Without a check the leader of one adds the other's members,
// whose logs it then overwrites with its own, or whose entries it takes
// as its own where index and term happen to match: acknowledged writes
// of one cluster lost. With it a leader adds no member of another raft
// cluster (foreign), and a member refuses the raft requests of another
// cluster's servers (kv/raftpeer).
//
// The id is 16 lowercase hex digits, kept in the stable store beside
// the server id, and published as TagCluster once known. It is set:
//
//   - at a bootstrap, to a hash of the bootstrap configuration's server
//     ids, which every member bootstrapping together computes alike
//     (server ids are unique to a data dir, so two bootstraps never do);
//   - on a member without one, by the first raft request of a leader
//     that has one (an AppendEntries or a snapshot): a new member takes
//     its leader's;
//   - by a leader without one: the one the servers of its configuration
//     publish, or, when none does (state of chute versions before the
//     id), a fresh one it proposes as a log entry (mintEntry); every
//     member applying the first such entry takes it, so two leaders
//     minting in turn still agree (Node.settle);
//   - on a member with state from before the id and no leader's entries
//     (out of the configuration when the id was minted), to the one a
//     server of its own configuration publishes (Node.follow).
//
// Once set it changes only by being cleared: at the start of a member
// without raft state (clusterID.clear). --force-new-cluster keeps it.

// clusterKey holds the raft cluster id in the stable store.
var clusterKey = []byte("chute-raft-cluster")

// mintPrefix starts the extensions of a log entry that sets the raft
// cluster id: the prefix, then the id. Its data is empty, which the
// key space applies as a command without operation.
var mintPrefix = []byte("chute-raft-cluster=")

// clusterIDLen is the length of a raft cluster id.
const clusterIDLen = 16

// validClusterID reports whether id is a raft cluster id: 16 lowercase
// hex digits.
func validClusterID(id string) bool {
	if len(id) != clusterIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// bootstrapClusterID is the raft cluster id of a bootstrap of cfg.
func bootstrapClusterID(cfg raft.Configuration) string {
	ids := make([]string, 0, len(cfg.Servers))
	for _, s := range cfg.Servers {
		ids = append(ids, string(s.ID))
	}
	slices.Sort(ids)
	sum := sha256.Sum256([]byte(strings.Join(ids, "\n")))
	return hex.EncodeToString(sum[:clusterIDLen/2])
}

// newClusterID returns a random raft cluster id.
func newClusterID() (string, error) {
	var b [clusterIDLen / 2]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("raftnode: mint raft cluster id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// clusterID is a member's raft cluster id, persisted in the stable store.
type clusterID struct {
	stable *raftboltdb.BoltStore
	mu     sync.Mutex // serialises changes and their writes
	v      atomic.Pointer[string]
	// changed receives a value, sent without blocking, when the id is
	// set: the node's loop publishes it at once, rather than at its next
	// round, so that the leader promotes a new member sooner.
	changed chan struct{}
}

// loadClusterID reads the id kept in stable, "" when there is none.
func loadClusterID(stable *raftboltdb.BoltStore) (*clusterID, error) {
	c := &clusterID{stable: stable, changed: make(chan struct{}, 1)}
	v, err := stable.Get(clusterKey)
	switch {
	case errors.Is(err, raftboltdb.ErrKeyNotFound) || (err == nil && len(v) == 0):
		v = nil
	case err != nil:
		return nil, fmt.Errorf("raftnode: read raft cluster id: %w", err)
	case !validClusterID(string(v)):
		return nil, fmt.Errorf("raftnode: the stable store holds %.40q as the raft cluster id", v)
	}
	s := string(v)
	c.v.Store(&s)
	return c, nil
}

// get returns the id, "" while there is none.
func (c *clusterID) get() string { return *c.v.Load() }

// adopt makes id the raft cluster id when there is none, and returns
// the id in force.
func (c *clusterID) adopt(id string) (string, error) {
	if !validClusterID(id) {
		return "", fmt.Errorf("raftnode: %.40q is no raft cluster id", id)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur := c.get(); cur != "" {
		return cur, nil
	}
	if err := c.stable.Set(clusterKey, []byte(id)); err != nil {
		return "", fmt.Errorf("raftnode: store raft cluster id: %w", err)
	}
	c.v.Store(&id)
	select {
	case c.changed <- struct{}{}:
	default:
	}
	return id, nil
}

// clear forgets the id, for a member without raft state (New): it came
// from a bootstrap that did not happen (a crash between keeping the id
// and the bootstrap) or from a leader whose entries never landed. Kept,
// it would make the member refuse the leader of the cluster it joins
// next, and not bootstrap with members it sees anew.
func (c *clusterID) clear() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.get() == "" {
		return nil
	}
	if err := c.stable.Set(clusterKey, nil); err != nil {
		return fmt.Errorf("raftnode: clear raft cluster id: %w", err)
	}
	empty := ""
	c.v.Store(&empty)
	return nil
}

// mintEntry is the log entry that sets the raft cluster id to id.
func mintEntry(id string) raft.Log {
	return raft.Log{Type: raft.LogCommand, Extensions: append(slices.Clip(mintPrefix), id...)}
}

// minted returns the id l sets, false when it sets none.
func minted(l *raft.Log) (string, bool) {
	if l.Type != raft.LogCommand || !bytes.HasPrefix(l.Extensions, mintPrefix) {
		return "", false
	}
	id := string(l.Extensions[len(mintPrefix):])
	return id, validClusterID(id)
}

// clusterFSM passes every entry to the key space's FSM after taking the
// id of a mint entry (the first one applied wins).
type clusterFSM struct {
	raft.FSM
	c   *clusterID
	log func(msg string, args ...any)
}

func (f *clusterFSM) note(l *raft.Log) {
	id, ok := minted(l)
	if !ok {
		return
	}
	got, err := f.c.adopt(id)
	switch {
	case err != nil:
		f.log("raft cluster id not kept", "err", err)
	case got == id:
		f.log("raft cluster id set by the leader", "raft_cluster", id, "index", l.Index)
	}
}

func (f *clusterFSM) Apply(l *raft.Log) any {
	f.note(l)
	return f.FSM.Apply(l)
}

// batchingClusterFSM is clusterFSM over a raft.BatchingFSM, which raft
// then drives by ApplyBatch.
type batchingClusterFSM struct {
	clusterFSM
	batch raft.BatchingFSM
}

func (f *batchingClusterFSM) ApplyBatch(logs []*raft.Log) []any {
	for _, l := range logs {
		f.note(l)
	}
	return f.batch.ApplyBatch(logs)
}

// wrapFSM returns fsm with the mint entries noted into c.
func wrapFSM(fsm raft.FSM, c *clusterID, log func(string, ...any)) raft.FSM {
	base := clusterFSM{FSM: fsm, c: c, log: log}
	if b, ok := fsm.(raft.BatchingFSM); ok {
		return &batchingClusterFSM{clusterFSM: base, batch: b}
	}
	return &base
}
