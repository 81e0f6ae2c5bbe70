package kv

import (
	"context"
	"crypto/tls"
	"net"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// tlsListener marks the connections of an https:// client URL, so that
// one gRPC server can serve http:// and https:// URLs side by side.
type tlsListener struct{ net.Listener }

func (l tlsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return tlsConn{c}, nil
}

// tlsConn is a connection accepted on an https:// URL.
type tlsConn struct{ net.Conn }

// mixedCredentials speak TLS on connections of https:// URLs and nothing
// on the others. A failed handshake closes only its connection.
type mixedCredentials struct {
	tls credentials.TransportCredentials
}

var _ credentials.TransportCredentials = mixedCredentials{}

// tlsDone is a connection of an https:// URL whose TLS handshake its
// listener made, to read the protocol the client chose (splitListener):
// gRPC takes it as it is.
type tlsDone struct{ *tls.Conn }

func (m mixedCredentials) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	switch tc := c.(type) {
	case tlsConn:
		return m.tls.ServerHandshake(tc.Conn)
	case tlsDone:
		info := credentials.TLSInfo{
			State:          tc.ConnectionState(),
			CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity},
		}
		return tc.Conn, info, nil
	}
	return insecure.NewCredentials().ServerHandshake(c)
}

func (m mixedCredentials) ClientHandshake(ctx context.Context, authority string, c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return m.tls.ClientHandshake(ctx, authority, c)
}

func (m mixedCredentials) Info() credentials.ProtocolInfo { return m.tls.Info() }

func (m mixedCredentials) Clone() credentials.TransportCredentials {
	return mixedCredentials{tls: m.tls.Clone()}
}

func (m mixedCredentials) OverrideServerName(string) error { return nil }
