package qlog

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jonboulle/clockwork"

	"chute/internal/setting"
)

// Defaults of Config.
const (
	DefaultSegmentBytes   = 64 << 20
	DefaultMaxRecordBytes = 4 << 20
	DefaultCompactRatio   = 2.0
	DefaultSyncInterval   = 3 * time.Millisecond
	DefaultSyncBatch      = 32
	DefaultPreallocBytes  = 4 << 20

	// minSegmentBytes keeps a segment larger than its header and a few
	// records; tests use segments this small to exercise rolling.
	minSegmentBytes = 1 << 10
	// quotaSegments is the fewest segments a quota holds: the head is
	// never deleted, so releasing everything frees all but one segment.
	quotaSegments = 4
	// maxRecordLimit keeps a frame's length within its 32 bits.
	maxRecordLimit = 1 << 30
)

// Config configures a Log. Open reads it once.
type Config struct {
	// Dir is the directory of the segment files, created if missing.
	// Required. Nothing else may write in it.
	Dir string

	// SegmentBytes is the size at which the log starts a new segment
	// file. A segment exceeds it only by one append larger than it, or by
	// release records. Zero: DefaultSegmentBytes. At least 1 KiB. With
	// a QuotaBytes, at most a quarter of it (but not below 1 KiB): only
	// segments behind the head are deleted, so a head as large as the
	// quota would keep the log full after every record is released.
	SegmentBytes int64

	// MaxRecordBytes bounds one record; a longer one fails with
	// ErrTooLarge. Zero: DefaultMaxRecordBytes. At most 1 GiB.
	MaxRecordBytes int

	// QuotaBytes bounds Size for appends: an append that would take the
	// log past it fails with ErrNoSpace. Release records and compaction
	// may pass it (by at most about a segment), so that space can always
	// be freed. Zero: no quota.
	QuotaBytes int64

	// NoSync writes records but never fsyncs them (etcd's
	// --unsafe-no-fsync): an append returns once its records are in the
	// page cache, which a crash of the process keeps and a crash of the
	// machine may not. False: every append is fsynced before it returns.
	NoSync bool

	// NoIOUring makes the writer write and fsync with system calls of its
	// own, as it does where Linux's io_uring is missing (before 5.12) or
	// refused (kernel.io_uring_disabled, a container's seccomp policy).
	// False: through an io_uring, whose completions the writer waits for
	// parked in Go's poller: a system call that lasts keeps the runtime's
	// monitor thread polling (see ring).
	NoIOUring bool
	// SyncInterval is the least time from the start of one fsync to the
	// start of the next while appends come from several callers at once:
	// the writer waits out the rest of it before the next fsync, and the
	// appends that come meanwhile share that fsync. An fsync costs the
	// process CPU of its own (docs/benchmarks.md), so under load fewer,
	// larger fsyncs cost less per record; an append after a batch of one
	// (a lone caller, or the first after a quiet spell) never waits.
	// Zero: DefaultSyncInterval; negative: no wait. Unused with NoSync.
	SyncInterval time.Duration

	// SyncBatch ends SyncInterval's wait early once the appends waiting
	// for the next fsync, those the writer took included, hold this
	// many records: the fsync costs each record little already, and what
	// the rest of the wait would still gather saves less CPU than the
	// wait costs every append in latency (under a fixed number of
	// callers, in throughput too). Zero: DefaultSyncBatch; negative: the
	// wait always runs out.
	SyncBatch int

	// Clock times SyncInterval. Nil: the real clock.
	Clock clockwork.Clock

	// PreallocBytes is how far ahead of its last record the head segment's
	// file is written with zeros: an fdatasync that covers only blocks
	// written before leaves the file's size and extents as they were, and
	// the file system commits no metadata for it. On the development
	// machine's ext4 that fsync costs 85-95 µs of CPU and 180 µs against
	// 140-170 and 260-330 appending 13 KB, 150 against 275 µs of CPU
	// appending 300 KB; the zeros cost about 0.3 ms of CPU a MiB, written
	// once per PreallocBytes with the append that passes them, and more
	// when the fsyncs write them back: past commits of 32 KiB on average
	// they cost more than they save, and none are written. The head
	// is cut back to its records when it is sealed and when the log
	// closes; recovery takes zeros to the end of a segment as its end.
	// The disk holds up to PreallocBytes more than Size, never more than
	// QuotaBytes. Zero: DefaultPreallocBytes; negative, or with NoSync:
	// none.
	PreallocBytes int64

	// CompactRatio bounds the disk used against the live records: once
	// Size passes CompactRatio times the live records' bytes plus a
	// segment, the oldest segment's live records are rewritten at the
	// head so that it can be deleted. Zero: DefaultCompactRatio. At
	// least 1.25: lower, the log would spend its time rewriting.
	CompactRatio float64

	// Logger receives the warnings of recovery and compaction. Nil:
	// discarded.
	Logger *slog.Logger
}

// DefaultConfig returns the defaults; Dir is left empty.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:   DefaultSegmentBytes,
		MaxRecordBytes: DefaultMaxRecordBytes,
		CompactRatio:   DefaultCompactRatio,
		SyncInterval:   DefaultSyncInterval,
		SyncBatch:      DefaultSyncBatch,
		PreallocBytes:  DefaultPreallocBytes,
	}
}

// FieldError is a setting that cannot work; Field names it.
type FieldError = setting.FieldError

// Validate reports every problem of c, each a *FieldError, joined. It
// does no I/O.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Pkg: "qlog", Sentinel: ErrInvalidConfig, Field: field, Err: fmt.Errorf(format, args...)})
	}
	if c.Dir == "" {
		bad("Dir", "directory must not be empty")
	}
	if c.SegmentBytes != 0 && c.SegmentBytes < minSegmentBytes {
		bad("SegmentBytes", "segment size %d is below %d", c.SegmentBytes, minSegmentBytes)
	}
	if c.MaxRecordBytes < 0 || c.MaxRecordBytes > maxRecordLimit {
		bad("MaxRecordBytes", "record limit %d is not within 1 to %d", c.MaxRecordBytes, maxRecordLimit)
	}
	if c.QuotaBytes < 0 {
		bad("QuotaBytes", "quota %d is negative", c.QuotaBytes)
	}
	if c.CompactRatio != 0 && !(c.CompactRatio >= 1.25) {
		bad("CompactRatio", "compact ratio %v is below 1.25", c.CompactRatio)
	}
	return errors.Join(errs...)
}

// withDefaults returns c with its zero values replaced by the defaults.
func (c Config) withDefaults() Config {
	if c.SegmentBytes == 0 {
		c.SegmentBytes = DefaultSegmentBytes
	}
	if c.QuotaBytes > 0 {
		c.SegmentBytes = max(minSegmentBytes, min(c.SegmentBytes, c.QuotaBytes/quotaSegments))
	}
	if c.MaxRecordBytes == 0 {
		c.MaxRecordBytes = DefaultMaxRecordBytes
	}
	if c.CompactRatio == 0 {
		c.CompactRatio = DefaultCompactRatio
	}
	if c.SyncInterval == 0 {
		c.SyncInterval = DefaultSyncInterval
	}
	if c.SyncBatch == 0 {
		c.SyncBatch = DefaultSyncBatch
	}
	if c.PreallocBytes == 0 {
		c.PreallocBytes = DefaultPreallocBytes
	}
	if c.NoSync {
		c.PreallocBytes = -1
	}
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}
