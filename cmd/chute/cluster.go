package main

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	"chute/dispatch"
	"chute/gossip"
	"chute/internal/nodestatus"
	"chute/kv/raftnode"
	"chute/sink"
)

// clusterStatusTimeout bounds the answer of each member to a cluster-wide
// status: a member that does not answer in time is marked, not waited for.
const clusterStatusTimeout = 2 * time.Second

// clusterStatus asks every alive member for its queues, each within
// clusterStatusTimeout, and merges the answers.
func (n *node) clusterStatus(ctx context.Context) nodestatus.Cluster {
	local := n.members.Local()
	members := n.members.Members()
	answers := make([]dispatch.Status, len(members))
	errs := make([]error, len(members))
	asked := make([]bool, len(members))
	var wg sync.WaitGroup
	var servers []sink.ServerState
	for i, m := range members {
		switch {
		case m.ID == local.ID:
			asked[i] = true
			answers[i] = n.queues.Status()
			servers = answers[i].ClickHouseServers
		case m.Status == gossip.StatusAlive:
			asked[i] = true
			wg.Add(1)
			go func() {
				defer wg.Done()
				cctx, cancel := context.WithTimeout(ctx, clusterStatusTimeout)
				defer cancel()
				answers[i], errs[i] = n.queues.PeerStatus(cctx, m.ID)
			}()
		}
	}
	wg.Wait()
	st := mergeStatus(local, members, asked, answers, errs)
	st.ClickHouseServers = servers
	addRecords(&st, n.queueRecords())
	return st
}

// maxStatusRecords bounds the dispatcher records a cluster-wide status
// lists besides the queues members reported.
const maxStatusRecords = 10000

// queueRecords returns the dispatcher records this node's key space
// holds, by queue name, at most maxStatusRecords.
func (n *node) queueRecords() map[string]dispatch.Record {
	out := make(map[string]dispatch.Record)
	for key, v := range n.kv.Prefix("/q/") {
		name := strings.TrimPrefix(key, "/q/")
		if strings.Contains(name, "/") || len(out) >= maxStatusRecords {
			continue // a consumer, delivery or dead-letter key
		}
		if rec, ok := dispatch.ParseRecord(string(v)); ok {
			out[name] = rec
		}
	}
	return out
}

// addRecords lists the queues whose dispatcher no answering member
// holds, such as one whose dispatcher failed and that no put re-elected
// since: their record names the dispatcher, their depth is unknown.
func addRecords(st *nodestatus.Cluster, records map[string]dispatch.Record) {
	names := make(map[string]string, len(st.Members))
	for _, m := range st.Members {
		names[m.ID] = m.Name
	}
	listed := make(map[string]bool, len(st.Queues))
	for _, q := range st.Queues {
		listed[q.Name] = true
	}
	for name, rec := range records {
		if listed[name] {
			continue
		}
		q := nodestatus.ClusterQueue{QueueStatus: dispatch.QueueStatus{Name: name, Dispatcher: gossip.ID(rec.Member).String(), Epoch: rec.Epoch}}
		q.DispatcherName = names[q.Dispatcher]
		st.Queues = append(st.Queues, q)
	}
	sort.Slice(st.Queues, func(i, j int) bool { return st.Queues[i].Name < st.Queues[j].Name })
}

// mergeStatus builds the cluster's status from the members' answers:
// answers[i] and errs[i] are members[i]'s, for those asked.
func mergeStatus(local gossip.Member, members []gossip.Member, asked []bool, answers []dispatch.Status, errs []error) nodestatus.Cluster {
	st := nodestatus.Cluster{Name: local.Name, Member: gossip.ID(local.ID).String(), Version: version,
		Members: []nodestatus.ClusterMember{}, Queues: []nodestatus.ClusterQueue{}, Backups: []nodestatus.ClusterBackup{}}
	names := make(map[string]string, len(members)) // id, 16 hex digits -> name
	for _, m := range members {
		names[gossip.ID(m.ID).String()] = m.Name
	}
	byName := make(map[string]*nodestatus.ClusterQueue)
	for i, m := range members {
		cm := nodestatus.ClusterMember{
			Member: nodestatus.Member{Name: m.Name, ID: gossip.ID(m.ID).String(), Status: m.Status.String(), PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs,
				RaftCluster: m.Tags[raftnode.TagCluster]},
			Version: m.Version,
		}
		switch {
		case !asked[i]:
		case errs[i] != nil:
			cm.Error = errs[i].Error()
		default:
			cm.Answered = true
			cm.Omitted = answers[i].Omitted
		}
		st.Members = append(st.Members, cm)
		if !cm.Answered {
			continue
		}
		for _, q := range answers[i].Queues {
			fromDispatcher := q.Dispatcher == cm.ID
			cur, ok := byName[q.Name]
			if !ok {
				cur = &nodestatus.ClusterQueue{}
				byName[q.Name] = cur
			}
			held, local := cur.Held+q.Held, cur.LocalConsumers+q.LocalConsumers
			switch {
			case fromDispatcher && (!cur.DispatcherAnswered || q.Epoch >= cur.Epoch):
				cur.QueueStatus, cur.DispatcherAnswered = q, true
			case !cur.DispatcherAnswered && (!ok || q.Epoch > cur.Epoch):
				// Not the dispatcher's word: its record, nothing it holds.
				cur.QueueStatus = dispatch.QueueStatus{Name: q.Name, Dispatcher: q.Dispatcher, Epoch: q.Epoch, Ack: q.Ack}
			}
			cur.Held, cur.LocalConsumers = held, local
		}
		for _, b := range answers[i].Backups {
			st.Backups = append(st.Backups, nodestatus.ClusterBackup{BackupStatus: b, KeptBy: cm.ID})
		}
	}
	for _, q := range byName {
		q.DispatcherName = names[q.Dispatcher]
		st.Queues = append(st.Queues, *q)
	}
	sort.Slice(st.Queues, func(i, j int) bool { return st.Queues[i].Name < st.Queues[j].Name })
	sort.SliceStable(st.Backups, func(i, j int) bool { return st.Backups[i].Queue < st.Backups[j].Queue })
	return st
}
