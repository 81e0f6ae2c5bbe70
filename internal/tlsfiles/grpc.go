package tlsfiles

import (
	"context"
	"net"

	"google.golang.org/grpc/credentials"
)

// Credentials returns gRPC transport credentials over s: a listener's
// handshakes use ServerConfig, a dialer's a ClientConfig made for that
// handshake, so both follow the files as they change.
func (s *Source) Credentials() credentials.TransportCredentials {
	return &creds{src: s, server: credentials.NewTLS(s.ServerConfig())}
}

type creds struct {
	src    *Source
	server credentials.TransportCredentials
}

func (c *creds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	host, _, err := net.SplitHostPort(authority)
	if err != nil {
		host = authority
	}
	if c.src.serverName != "" {
		// grpc verifies the authority's host: hand it the derived name.
		authority = c.src.serverName
	}
	return credentials.NewTLS(c.src.ClientConfig(host)).ClientHandshake(ctx, authority, conn)
}

func (c *creds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c.server.ServerHandshake(conn)
}

func (c *creds) Info() credentials.ProtocolInfo { return c.server.Info() }

func (c *creds) Clone() credentials.TransportCredentials {
	return &creds{src: c.src, server: c.server.Clone()}
}

func (c *creds) OverrideServerName(string) error { return nil }
