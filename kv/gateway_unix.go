//go:build unix

package kv

import (
	"errors"
	"net"
	"syscall"
	"time"
)

// isHTTP2 reports whether c's first bytes are HTTP/2's client preface,
// peeking them (MSG_PEEK) so that they stay unread. It waits at most
// sniffTimeout for them; a connection that sends nothing in that time,
// or is closed first, is answered false and left to the HTTP server,
// whose own timeouts close it.
func isHTTP2(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	_ = c.SetReadDeadline(time.Now().Add(sniffTimeout))
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	var buf [len(http2Preface)]byte
	n := 0
	var perr error
	err = rc.Read(func(fd uintptr) bool {
		n, _, perr = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		if errors.Is(perr, syscall.EAGAIN) {
			return false // nothing yet: wait until readable
		}
		// A start of the preface: wait for more (the poller wakes this
		// on the next bytes, or the deadline ends it).
		return perr != nil || n == 0 || n == len(buf) || string(buf[:n]) != http2Preface[:n]
	})
	return err == nil && perr == nil && n == len(buf) && string(buf[:]) == http2Preface
}
