//go:build !linux

package chtest

// portClaims claims nothing where the kernel offers no
// open-file-description locks: two tests' servers may then be given the
// same port while one of them is stopped.
type portClaims struct{}

func openPortClaims() (*portClaims, error)  { return &portClaims{}, nil }
func (*portClaims) claim(int) (bool, error) { return true, nil }
func (*portClaims) release(int) error       { return nil }
func (*portClaims) close() error            { return nil }
