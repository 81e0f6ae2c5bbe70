package bench

import (
	"errors"
	"fmt"
	"net"
)

// freePorts returns n distinct loopback TCP ports that were free a moment
// ago: it holds n listeners on 127.0.0.1:0 at once, then closes them.
func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			_ = l.Close() // only held to reserve the port
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("bench: free port: %w", err)
		}
		ls = append(ls, l)
		addr, ok := l.Addr().(*net.TCPAddr)
		if !ok {
			return nil, errors.New("bench: free port: listener has no TCP address")
		}
		ports = append(ports, addr.Port)
	}
	return ports, nil
}
