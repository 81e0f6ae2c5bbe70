package peer

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// MaxMessageBytes bounds one message on the peer link, received by the
// listener and by every connection Dial opens.
const MaxMessageBytes = 64 << 20

// Dial opens a lazy client connection to a peer's listener, with opts
// added to its own (credentials, message buffers, codec): plain text
// unless opts hold transport credentials.
func Dial(addr string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes)),
	}, opts...)...)
}
