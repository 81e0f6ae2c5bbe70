package peer

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
)

// MaxMessageBytes bounds one message on the peer link, received by the
// listener and by every connection Dial opens.
const MaxMessageBytes = 64 << 20

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
	}, opts...)...)
}
