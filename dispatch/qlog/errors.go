package qlog

import (
	"errors"
	"fmt"
	"syscall"
)

// Errors of the log. dispatch maps them to etcd's gRPC errors.
var (
	// ErrNoSpace: an append would take the log past Config.QuotaBytes, or
	// the file system is full (ENOSPC, EDQUOT). Nothing of the append is
	// kept; the next append succeeds once space is freed.
	ErrNoSpace = errors.New("qlog: no space")
	// ErrTooLarge: a record is longer than Config.MaxRecordBytes.
	ErrTooLarge = errors.New("qlog: record too large")
	// ErrClosed: the log is closed.
	ErrClosed = errors.New("qlog: log closed")
	// ErrFailed: a write failed in a way the log cannot undo (not for
	// lack of space), or an fsync failed (for any reason), so it takes
	// no more appends: the caller reopens it, which recovers what
	// reached the disk.
	ErrFailed = errors.New("qlog: log failed")
	// ErrInvalidConfig is wrapped by every error Config.Validate returns.
	ErrInvalidConfig = errors.New("qlog: invalid config")
)

// noSpace reports whether err is the file system saying it is full.
func noSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// syncFailed is the error of an fsync. After a failed fsync the kernel's
// view of the file cannot be trusted, whatever the reason: with delayed
// allocation a full file system fails the fsync, and the pages it could
// not write may be dropped as clean, under data a later fsync then
// seems to cover. So it fails the log even as ENOSPC (undo), where a
// write that failed for lack of space is undone and the log goes on.
type syncFailed struct{ err error }

func (e syncFailed) Error() string { return e.err.Error() }
func (e syncFailed) Unwrap() error { return e.err }

// ioError wraps err, an error of a write, fsync or truncate, so that
// errors.Is matches ErrNoSpace when the file system is full.
func ioError(err error) error {
	if noSpace(err) {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return err
}
