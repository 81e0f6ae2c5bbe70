// Package peer owns the node-to-node gRPC link, "the peer link": the
// listener on --listen-peer-urls (Server), the dialing of another member's
// listener (Dial), the identity every call carries (OutgoingContext,
// CallerMember) and the protobufs of the services it serves (peerpb/). It
// serves the services other packages register on it, and knows nothing of
// what they do: the key-space replication (gossip), the queues' forwarding
// and hand-overs (dispatch), raft's transport (kv/raftpeer).
//
// Invariants:
//
//   - The link is never served on the etcd client port.
//   - Every call carries the caller's cluster id and member id
//     (OutgoingContext); the listener refuses, with PermissionDenied and
//     before any handler runs, a call whose cluster id is not its own. The
//     cluster id is no secret (every etcd response header prints it): it
//     only keeps two clusters apart. The member id is as the caller sent
//     it (CallerMember), for logs and bounds, not for trust.
//   - What keeps strangers out is the transport, Config.Credentials, used
//     by the listener and handed to Dial by every dialer of the link
//     (replication, forwarding, hand-overs, backups, raft): TLS from the
//     --peer-* certificate files, with --peer-client-cert-auth requiring
//     a certificate of --peer-trusted-ca-file; or, with no peer
//     certificate but a gossip key, mutual TLS from certificates every
//     member derives from that key (chute/internal/tlsfiles), so a cluster
//     with a gossip key is closed to non-members by default. A process
//     without them fails the handshake and reaches no method. With
//     neither, the link is plain text and chute logs so at start.
//   - Every URL of the listener is http:// or every one is https://, and
//     https:// needs credentials (Config.Validate).
//   - A message on the link is at most MaxMessageBytes, received by the
//     listener and by every connection Dial opens.
//   - Flow control is fixed at both ends: a stream holds at most
//     StreamWindowBytes unread, a connection ConnWindowBytes, and no end
//     pings to estimate the link's bandwidth.
//   - Services are registered before Start; Shutdown cuts every stream
//     rather than draining it, as the link's streams are long-lived and
//     their users repair or retry what was cut.
//
// The wire protocol is peerpb's: its proto package ("chute.peer.v1") and
// service names make the gRPC method paths, which must not change.
// peerpb.ForwardFrame, the bulk of what the link carries, is received as
// a peerpb.RecvFrame, which decodes itself (by hand with protowire), and
// the listener's codec (kv's) uses that instead of proto.Unmarshal: one
// copy of the frame, into a buffer of the codec's pool, that its values
// are views of, its batches and messages in arrays the next frame is
// decoded into once the receiver is done with this one (Done), a
// repeated queue name kept once. It accepts and refuses what
// proto.Unmarshal does, unknown fields skipped (a fuzz test holds it to
// that), so the wire form stays the .proto's. It is sent as a
// peerpb.SendFrame, of SendBatches whose messages were encoded into one
// buffer each as the batch was made, with no QueueMessage per message:
// the codec writes the frame from them (SendFrame.AppendEncoded), the
// bytes proto.Marshal writes for the ForwardFrame of the same batches.
package peer
