// Package nodestatus is the JSON a chute node serves at GET /status and
// GET /status/cluster on its metrics listener. The node fills these types and clients (chute
// status, the benchmark, the fault and end-to-end tests) decode them, so
// the two sides cannot drift apart. The queue and backup entries are the
// dispatch package's own types.
package nodestatus

import (
	"chute/dispatch"
	"chute/sink"
)

// Node is GET /status of one node.
type Node struct {
	Name string `json:"name"`
	// Member is this node's member id in hex.
	Member  string   `json:"member_id"`
	Version string   `json:"version"`
	Members []Member `json:"members"`
	// Queues are the queues this node holds state of; never null.
	Queues []dispatch.QueueStatus `json:"queues"`
	// Backups are the copies this node keeps of queues other nodes
	// dispatch with ack=replicated.
	Backups []dispatch.BackupStatus `json:"backups"`
	// ClickHouseServers are the servers of --clickhouse-url as this node
	// sees them: up or down, batches and bytes sent. Each node keeps its
	// own view.
	ClickHouseServers []sink.ServerState `json:"clickhouse_servers,omitempty"`
}

// Member is a member of the cluster as the node sees it.
type Member struct {
	Name string `json:"name"`
	// ID is the member id in hex.
	ID string `json:"id"`
	// Status is the gossip status: "alive" when up.
	Status     string   `json:"status"`
	PeerURLs   []string `json:"peer_urls"`
	ClientURLs []string `json:"client_urls"`
	// RaftCluster is the id of the raft cluster the member's key space
	// belongs to, as it publishes it; absent while it has none. Members
	// showing different ones are two clusters under one cluster name,
	// which never merge.
	RaftCluster string `json:"raft_cluster,omitempty"`
}

// Cluster is GET /status/cluster: the members as this node
// sees them, whether each answered, and every queue of the cluster as
// its dispatcher reports it.
type Cluster struct {
	Name    string          `json:"name"` // the node that gathered it
	Member  string          `json:"member_id"`
	Version string          `json:"version"`
	Members []ClusterMember `json:"members"`
	Queues  []ClusterQueue  `json:"queues"`
	// Backups are the copies members keep of queues others dispatch.
	Backups []ClusterBackup `json:"backups"`
	// ClickHouseServers are the servers of --clickhouse-url as the node
	// that gathered the status sees them (Name); other nodes' views are
	// in their own GET /status.
	ClickHouseServers []sink.ServerState `json:"clickhouse_servers,omitempty"`
}

// ClusterMember is a member and how its answer went.
type ClusterMember struct {
	Member
	Version string `json:"version"`
	// Answered is false for a member that was not asked (not alive) or
	// did not answer; Error says why for one asked.
	Answered bool   `json:"answered"`
	Error    string `json:"error,omitempty"`
	// Omitted counts queues and backups the member left out of its
	// answer, over the bounds of one answer.
	Omitted int `json:"omitted,omitempty"`
}

// ClusterQueue is a queue as its dispatcher reports it. When the
// dispatcher did not answer, Dispatcher and Epoch come from the record
// as another member knows it and DispatcherAnswered is false: the depth
// fields are then unknown, not zero. Held and LocalConsumers are summed
// over the members that answered.
type ClusterQueue struct {
	dispatch.QueueStatus
	DispatcherName     string `json:"dispatcher_name,omitempty"`
	DispatcherAnswered bool   `json:"dispatcher_answered"`
}

// ClusterBackup is a backup and the member keeping it.
type ClusterBackup struct {
	dispatch.BackupStatus
	KeptBy string `json:"kept_by"` // member id
}
