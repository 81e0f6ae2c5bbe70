package testutil

import (
	"net"
	"strconv"
	"sync"
	"testing"
)

// portTries bounds the listens FreePortOn makes before it gives up.
const portTries = 100

// handedOut is every port this test binary was handed. Ports belong to
// the process, so the record of them does too: this is the package's only
// variable.
var handedOut = portSet{ports: make(map[int]bool)}

// portSet is a set of ports, whatever their address: a port handed out on
// 127.0.0.2 is not handed out again on 127.0.0.3.
type portSet struct {
	mu    sync.Mutex // guards ports
	ports map[int]bool
}

// FreePort returns a TCP port of 127.0.0.1 that was free a moment ago and
// that this test binary has not been handed before.
func FreePort(t testing.TB) int {
	t.Helper()
	return FreePortOn(t, "127.0.0.1", false)
}

// FreeAddr returns "127.0.0.1:<FreePort>".
func FreeAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t)))
}

// FreePortOn is FreePort on host, a loopback address such as 127.0.0.2;
// with udp the port is also free for UDP (serf binds both).
func FreePortOn(t testing.TB, host string, udp bool) int {
	t.Helper()
	handedOut.mu.Lock()
	defer handedOut.mu.Unlock()
	for range portTries {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatalf("testutil: free port on %s: %v", host, err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		free := !handedOut.ports[port]
		if free && udp {
			pc, err := net.ListenPacket("udp", net.JoinHostPort(host, strconv.Itoa(port)))
			free = err == nil
			if free {
				_ = pc.Close() // only held to learn the port is free
			}
		}
		_ = l.Close() // ditto
		if free {
			handedOut.ports[port] = true
			return port
		}
	}
	t.Fatalf("testutil: free port on %s: none found in %d tries", host, portTries)
	return 0
}
