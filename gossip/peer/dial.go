package peer

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
)

// MaxMessageBytes bounds one message on the peer link, received by the
// listener and by every connection Dial opens.
const MaxMessageBytes = 64 << 20

// BufferBytes is the size of a peer connection's read buffer and of its
// write buffer, at both ends: gRPC's default, 32 KiB, reads and writes a
// forward frame of megabytes 32 KiB a syscall. Three nodes taking txns
// of 128 puts on the two that forward spent 5.7 against 6.7 µs of CPU
// per row in all (medians of ten interleaved runs each, lower in every
// pair but one tie): fewer syscalls, and fewer wakeups of the Go
// scheduler to take a processor back from one. A member holds a few
// connections to each other member (queues, raft), 2 MiB each.
const BufferBytes = 1 << 20

// StreamWindowBytes and ConnWindowBytes are the HTTP/2 flow-control
// windows of every peer connection, a stream's and the whole
// connection's, at both ends. Set, they turn off grpc-go's estimate of
// the link's bandwidth-delay product, which pings the other end with
// nearly every message received while the link is quiet and grows the
// windows from 64 KiB up to 16 MiB: on three idle nodes half the
// writes of each were those pings, their acks and window updates (the
// raft leader 128 a second, against 77 with the windows set; each
// follower 70 against 33), and three nodes taking txns of 128 puts on
// the two that forward made 14 syscalls per 1,000 rows on the dispatcher
// and 15 on each forwarder, against 18 and 17. A stream may then carry
// 4 MiB unread, a connection 16 MiB, which at a millisecond's round
// trip is gigabytes a second; a link of 100 ms carries 40 MB a second a
// stream.
const (
	StreamWindowBytes = 4 << 20
	ConnWindowBytes   = 16 << 20
)

// Keepalive of every peer connection, at both ends: a connection that
// reads nothing for KeepaliveTime sends a ping, and one not answered
// within KeepaliveTimeout is closed, so that the next call dials anew
// and the streams on it end at the listener's end too. On a
// dead path (a link dropping everything, its connections left open) a
// connection otherwise stayed open, TCP retransmitting with a backoff
// that grows to two minutes: once the link was back, a member kept
// holding puts for the dispatcher it could reach again until TCP's next
// try (16-24 s after a 30 s cut on namespaces, against under a second
// with keepalive). grpc-go raises a client's time below 10 s to 10 s;
// the listener accepts pings every MinPingInterval, with or without
// calls open.
const (
	KeepaliveTime    = 10 * time.Second
	KeepaliveTimeout = 5 * time.Second
	MinPingInterval  = 5 * time.Second
)

// reconnect is how a connection to a peer that went away tries again:
// soon and often. gRPC's default backs off to 2 minutes, so a member
// restarted after a few seconds stayed unreachable long after it was
// back: raft's leader could not reach it and it called elections.
func reconnect() grpc.ConnectParams {
	return grpc.ConnectParams{
		Backoff: backoff.Config{
			BaseDelay:  50 * time.Millisecond,
			Multiplier: 1.6,
			Jitter:     0.2,
			MaxDelay:   time.Second,
		},
		MinConnectTimeout: 2 * time.Second,
	}
}

// Dial opens a lazy client connection to a peer's listener, with opts
// added to its own (credentials, message buffers, codec): plain text
// unless opts hold transport credentials.
func Dial(addr string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes)),
		grpc.WithConnectParams(reconnect()),
		grpc.WithReadBufferSize(BufferBytes),
		grpc.WithWriteBufferSize(BufferBytes),
		grpc.WithInitialWindowSize(StreamWindowBytes),
		grpc.WithInitialConnWindowSize(ConnWindowBytes),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout, PermitWithoutStream: true}),
	}, opts...)...)
}
