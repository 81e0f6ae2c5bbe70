// Package nodestatus is the JSON a chute node serves at GET /status on
// its metrics listener. The node fills these types and clients (chute
// status, the benchmark, the fault and end-to-end tests) decode them, so
// the two sides cannot drift apart. The queue and backup entries are the
// dispatch package's own types.
package nodestatus

import "chute/dispatch"

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
}
