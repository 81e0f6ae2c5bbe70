// Package raftpeer is hashicorp/raft's transport over the peer link: raft's
// RPCs travel as the Raft service (gossip/peer/peerpb/raft.proto) on the peer
// listener, with its TLS and its cluster check, so raft needs no listener
// of its own. A raft.ServerAddress is a member's peer listener, host:port.
//
// A Transport is both ends. As a client it keeps one lazily dialed gRPC
// connection per target address, with Config.DialOptions (the link's
// credentials) and every call carrying the cluster and member ids
// (peer.OutgoingContext); each call is bounded by Config.Timeout. A
// connection lives until Close: raft's targets are the few members of
// its configuration.
// AppendEntriesPipeline is one bidirectional stream per pipeline with at
// most Config.MaxInFlight requests unanswered; InstallSnapshot is a client
// stream, the request then the snapshot in chunks. As a server (Register)
// it hands each received RPC to raft on Consumer and waits for raft's
// answer; heartbeats go to the handler raft sets, if any, so they do not
// queue behind a disk write. Before raft sees a request, the server
// refuses one for another raft server than this one (SetLocalID) and one
// from a server of another raft cluster under the same cluster name
// (SetRaftCluster), whose leader would otherwise overwrite this
// member's log.
//
// # Encoding
//
// Requests and responses are raft's own structs in raft's msgpack encoding
// (hashicorp/go-msgpack, configured as raft's NetworkTransport configures
// it), carried in opaque bytes fields, rather than proto messages
// mirroring them. raft owns these structs and adds fields between
// releases (RPCHeader's ID and Addr, PreVote, a log entry's AppendedAt);
// with its own encoding they travel as raft means them, with no mapping
// to keep in step and no field silently dropped by one, and both ends
// decode what any go-msgpack v2 writes. The cost is a message opaque to
// gRPC tooling, which only chute's own members speak anyway.
//
// # Bounds
//
// A peer is trusted to be a member (the listener checked), not to be
// correct, so what it sends is bounded as client input is: an encoded
// request at most MaxMessageBytes (checked before decoding, and by the
// sender before sending), an AppendEntries at most MaxEntries entries, a
// snapshot announced at most MaxSnapshotBytes, each chunk at most
// SnapshotChunkBytes, and the chunks exactly the announced size: a longer
// or shorter stream fails raft's read, so raft never installs it. raft
// must take a request within Timeout, and each snapshot chunk must come
// within Timeout, so a stalled peer cannot hold raft's goroutine. A
// refused request is answered with ResourceExhausted (a size bound),
// InvalidArgument (malformed, wrong snapshot size) or Unavailable
// (stalled, closed); see toStatus.
//
// # Concurrency and ownership
//
// Every method is safe for concurrent use. Transport.Close cancels one
// context that every call, pipeline and server wait watches, closes every
// pipeline (each owns one receive goroutine, which Close waits for) and
// the connections; the service then answers Unavailable. Byte slices
// decoded from a peer (log entries' data) are fresh copies owned by raft;
// a snapshot chunk is handed to raft's reader and not touched again by the
// server.
package raftpeer
