//go:build !unix

package kv

import "net"

// isHTTP2 answers true where the first bytes cannot be peeked: every
// connection goes to gRPC, and the gateway serves none.
func isHTTP2(net.Conn) bool { return true }
