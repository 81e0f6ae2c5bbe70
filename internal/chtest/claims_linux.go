package chtest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// portClaims is a Server's hold on the loopback ports of its server, from
// the pick until the test ends, through Stop and Kill: 18.16 binds with
// SO_REUSEPORT, so a second server given the port of a stopped one starts
// beside it when it restarts, and the two split its connections, each
// answering for tables it does not hold. The claims of every Server of
// every test process of one user are locks in one file, an
// open-file-description lock on the byte whose offset is the port: the
// kernel drops them with the process, however it ends.
type portClaims struct{ f *os.File }

// openPortClaims opens the user's claims file in the temp directory.
func openPortClaims() (*portClaims, error) {
	path := filepath.Join(os.TempDir(), fmt.Sprintf("chute-chtest-ports-%d", os.Getuid()))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("port claims: %w", err)
	}
	return &portClaims{f: f}, nil
}

// claim takes port, reporting false when another Server holds it. Taking
// a port c holds already succeeds.
func (c *portClaims) claim(port int) (bool, error) {
	err := c.lock(port, unix.F_WRLCK)
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claim port %d: %w", port, err)
	}
	return true, nil
}

// release gives port up.
func (c *portClaims) release(port int) error {
	if err := c.lock(port, unix.F_UNLCK); err != nil {
		return fmt.Errorf("release port %d: %w", port, err)
	}
	return nil
}

func (c *portClaims) lock(port int, typ int16) error {
	return unix.FcntlFlock(c.f.Fd(), unix.F_OFD_SETLK, &unix.Flock_t{
		Type: typ, Whence: io.SeekStart, Start: int64(port), Len: 1,
	})
}

// close gives every port c holds up.
func (c *portClaims) close() error { return c.f.Close() }
