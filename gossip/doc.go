// Package gossip will own cluster membership: a hashicorp/serf agent bound to
// --gossip-listen, the node's serf tags (peer URL, client URLs, version), typed
// membership events for the rest of the node, and the peer transport (our own
// gRPC service on --listen-peer-urls, never on the client port).
//
// It holds no code yet; the cluster issue fills it.
package gossip
