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
	// ErrFailed: a write or fsync failed in a way the log cannot undo
	// (not for lack of space), so it takes no more appends: the caller
	// reopens it, which recovers what reached the disk.
	ErrFailed = errors.New("qlog: log failed")
	// ErrInvalidConfig is wrapped by every error Config.Validate returns.
	ErrInvalidConfig = errors.New("qlog: invalid config")
)

// noSpace reports whether err is the file system saying it is full.
func noSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// ioError wraps err, an error of a write, fsync or truncate, so that
// errors.Is matches ErrNoSpace when the file system is full.
func ioError(err error) error {
	if noSpace(err) {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return err
}
