// Package qlog is a node's queue log: the append-only, checksummed file
// log under the data directory that holds what the node holds of every
// queue, so that a restarted node recovers it. It knows nothing of
// queues: a record is opaque bytes, named by a uint64 seq that grows by
// one per record appended. One log serves every queue of the node, so one
// fsync covers the puts of all of them.
//
// # Use
//
// Open recovers the log and replays its live records; Append writes
// records and returns once they are fsynced; Release marks records no
// longer needed (acknowledged, inserted); Close ends it. OpenMapped and
// AppendMapped do the same and hand the records out as views of the
// segment files' mappings (see Mapped records). Stats has the
// counters for metrics: fsyncs, records per fsync, moves, deletions.
//
// # Format
//
// The log is a directory of segment files, 0000000000000001.qlog and up
// (the number in hex, one more per segment). A segment starts with a
// 32-byte header: the magic "chuteqlg", the seq of its first data record
// (uint64), the format version (uint32, 2), flags (uint32; bit 0: the
// file was reused, below), the salt (uint32: the segment's number) and a
// CRC-32C of those. Then frames, each
//
//	length  uint32   bytes of the body
//	crc     uint32   CRC-32C (Castagnoli) of the length and the body, from the salt
//	body    type byte, then the payload
//
// Version 1, which chutes wrote before files were reused, has a 24-byte
// header (no flags, no salt: its frames' CRCs start from zero); Open
// reads it and appends to such a head as version 1. A segment of a later
// version fails Open, untouched.
//
// little-endian, of three types:
//
//	1 data     the record; its seq is the segment's first seq plus the
//	           number of data frames before it in the segment
//	2 moved    seq (uint64), then the record: a live record that
//	           compaction copied from an older segment
//	3 release  runs of released seqs, each two uvarints: its first seq
//	           less the end of the run before, and its length less one
//
// A segment is written at its end only, and a new one is started once the
// next batch would take it past Config.SegmentBytes (one append larger
// than that makes a larger segment: appends are never split). The head
// segment's file runs on past its last frame with zeros written ahead
// (Config.PreallocBytes, 4 MiB, while commits are small), so that most
// fsyncs cover blocks the file already had and commit no metadata;
// sealing the head and closing the log cut them, and recovery takes
// zeros to the end of a file for its end, where anything else after the
// last intact frame is damage (but for a reused file's head: Reused
// files). A head written over a reused file needs no zeros until it
// passes the older segment's end.
//
// # Group commit
//
// One goroutine, the writer, owns the files. Append queues its records
// for it, wakes it and waits for its answer. The writer takes every append
// queued, writes them in one write (with the pending release records
// and a chunk of compaction), calls fdatasync once, and answers them all.
// Appends that come while it writes or fsyncs wait in their own
// goroutines and make the next batch: the batch grows with the load, and
// a lone append goes at once, with no timer to wait for company. Nothing
// queues but the appends waiting for their answer. With NoSync the writer never
// fsyncs.
//
// On Linux (5.12 and later) the writer hands the write and the fdatasync
// of a batch, linked, to an io_uring and waits for their completion
// parked in Go's network poller (an eventfd), not in a system call; the
// ring's workers, threads of the process the kernel runs, do them. Go's
// runtime takes a processor back from a goroutine in a long system call
// only through its monitor thread, which polls every 20 µs for as long
// as such calls keep coming: the writes and fsyncs of a busy log kept it
// polling, 7-10% of a node's CPU on the development machine, where the
// ring brought a one-node txn-128 load from 3.32 to 3.02 µs of CPU per
// row (medians of six runs each) and a three-node dispatcher from 3.3 to
// 2.9. Where io_uring is missing or refused (a seccomp policy,
// kernel.io_uring_disabled), with Config.NoIOUring, and after a ring
// fails to take an operation (with a warning), the writer makes the
// calls itself.
//
// An fdatasync costs the calling process CPU of its own, about 90 µs on
// the development machine's virtual disk over blocks the file had (140
// to 170 where it grows the file) whatever it covers, so a busy
// log that fsyncs as often as the disk allows spends a large share of
// its CPU there. After an fsync that covered the appends of several
// callers, or while another caller's append waited for it, the writer
// starts the next one no sooner than Config.SyncInterval (3ms) after it:
// the appends that come meanwhile share it, until the appends waiting
// hold Config.SyncBatch (32) records: the fsync costs each record at
// most about 3 µs then, and the rest of the wait would cost every
// append its latency. A fixed number of callers each putting one at a
// time waited out the whole interval otherwise: 100 unary producers on
// one node were answered about 90 at a time, every 3.5 ms. Records, not
// appends, so that three nodes' dispatcher, whose callers are the two
// forwarding members with a frame of many puts each, counts their
// puts. Measured on the development machine against the whole wait:
// one node, unary, 18% more puts/s for the same CPU per put; three
// nodes, unary, 15% more for 6% less CPU per row; txn-128 loads fsync
// twice as often, within the noise in CPU.
//
// The wait is only for a log that has company: after a batch of one
// with nobody waiting (a lone caller, a quiet spell) nothing waits, and
// an interval that has already passed costs nothing. Company pays for
// it in latency: two callers each putting one at a time, which took
// turns at an fsync each, share one every 3ms instead (on the
// development machine's disk 565 puts/s for the two against 750).
//
// An append that fails leaves nothing: a write or fsync that failed is cut
// off the file. When a write finds the file system full (ENOSPC,
// EDQUOT), or an append would pass Config.QuotaBytes, it fails with
// ErrNoSpace and the log goes on; any other failure fails the log
// (ErrFailed), an fsync that failed for lack of space too: after a
// failed fsync the kernel's view of the file cannot be trusted (pages
// it could not write may be dropped as clean), and the caller reopens
// it, which recovers what reached the disk.
//
// # Release and deletion
//
// Release clears the record's bit in memory (each segment has a bitmap of
// its live data records; moved records are in a map) and queues a
// release frame, written with the next batch and fsynced with the next
// append: a release alone costs no fsync. One lost in a crash means the
// record is replayed again, so delivery is at least once; a record not
// released is never lost.
//
// Only the oldest segment is deleted, once none of its records is live,
// and never the head. So with Config.QuotaBytes a segment is at most a
// quarter of the quota: once every record is released, the log is back
// to one segment at most, and appends fit again.
// A release frame always comes after the record it releases (Release
// takes seqs that Append returned), so the release frames of the oldest
// segment concern only its own records: deleting it can never bring a
// released record back. The directory is fsynced after each deletion, so
// that a crash cannot keep a later deletion and lose an earlier one.
//
// # Reused files
//
// A deleted segment's file is kept, renamed 0000000000000001.spare (at
// most two), and a new segment is written over it: its header, with
// flagReused, is written and fsynced, then the file renamed. Writing over
// blocks the file has, whose pages the cache may still hold, costs the
// file system no allocation and an fdatasync no metadata, and deleting
// a file no page freeing: on the development machine 0.3 against 0.6 ns
// of CPU a byte written and fsynced (256 KiB per fdatasync), about 4% of
// a one-node txn-128 load's CPU. Decisions:
//
//   - The older segment's frames stay in the file past the new one's
//     last, until they are overwritten. Each segment's frames are
//     salted with its number, which no other segment of the log has
//     (a spare is never written over by a segment numbered at or below
//     its own): a CRC over the same bytes from another salt always
//     differs, so an older frame never checks out as the new segment's,
//     even at the same offset.
//   - Recovery reads the newest segment to its first frame that does not
//     check out, and, if the file was reused, cuts it there without a
//     warning: what follows is the older segment's, or a write a crash
//     interrupted, as in any head. Every other segment ends exactly at
//     its last frame: sealing a reused head cuts it to its records and
//     fsyncs before the next segment is made, and the close cuts it too.
//     So a frame that does not check out in an older segment is still
//     damage, warned of.
//   - A spare is written over only once its segment's mapping ended (the
//     Region's cleanup ran): a holder of a view reads the old record for
//     as long as it keeps the Region, as with a deleted file. Only a
//     segment the log made becomes a spare, and Open deletes the spare
//     files it finds: an earlier log of the same process (closed, then
//     opened again) may still map those files.
//   - A crash can lose the renaming to the spare's name (a directory
//     fsync that failed is only warned of) after the next segment's
//     header was written over the file: Open finds a version 2 header
//     whose salt is not its file's number, and deletes the file, which
//     held no live record (the next segment took records only once its
//     own renaming, and so the one before, was durable).
//   - Spare files count against QuotaBytes (Stats.Spares): an append that
//     would pass the quota, or finds the disk full, deletes them first.
//
// # Compaction
//
// A record released late would pin the segment it is in, and so every
// later one. So once Size passes Config.CompactRatio times the bytes of
// the live records plus a segment, the writer rewrites the live records
// of the oldest segment at the head, as moved frames, a chunk (1 MiB at
// most) per batch, fsynced with the batch's appends, and then deletes
// the segment. A moved record keeps its seq: the caller never hears of
// compaction, and Release takes the seq it always had. The cost is a map
// entry per moved record and replay merging moved records into seq order.
//
// A copy becomes the live one only once it is durable, and only if the
// record was not released meanwhile; its release frame, if any, comes
// after the copy. After a crash with both copies on disk, the later one
// wins (replay reads segments in order). A compaction starts only once
// the dead bytes pass CompactRatio-1 times the live ones (plus a
// segment), so on average it copies about 1/(CompactRatio-1) bytes per
// byte released, and the log holds about CompactRatio times its live
// bytes plus a segment or two (one being written, one being compacted).
// The live bytes are estimated from each segment's mean record size.
//
// # Mapped records
//
// AppendMapped and OpenMapped hand out each record as a read-only view of
// its segment file's mapping (mmap, shared, read-only), a Region, so that
// a caller that keeps its records in memory (dispatch keeps every queued
// message's value) keeps them in the page cache, which the kernel writes
// back and can drop, rather than on its heap or in its anonymous memory.
// Decisions:
//
//   - The head is mapped with room to grow by twice Config.SegmentBytes:
//     the file grows under the mapping, and a view covers only bytes
//     written, which never shrink afterwards (a failed write is cut
//     before its records are handed out; Open cuts damage before it
//     maps). A record past the mapping (an append larger than the room)
//     gets no view, and its caller keeps its own copy; so does a caller
//     on a system without mmap.
//   - A view stays valid while its Region is reachable: the mapping ends
//     in a runtime cleanup once the garbage collector finds the Region
//     unreachable, never when the log releases, moves or deletes the
//     record. So a record a caller still holds reads after its
//     compaction and its file's deletion. The price: a deleted file's
//     disk space stays taken until then (Size no longer counts it);
//     Region.Deleted tells a holder that keeps views long to copy them
//     (dispatch does, in its reconcile loop).
//   - A view read maps its page into the process's resident memory,
//     where it would stay until the mapping ends (a drainer reads every
//     value it inserts). So every 8 MiB written, and at each roll for
//     the sealed segment, the pages of the mappings leave the process's
//     page tables (MADV_DONTNEED): the page cache keeps them, a later
//     read costs a minor fault, and the resident pages are bounded by
//     about what is read between two drops.
//   - A Region keeps its segment file open as long as it is reachable,
//     so that a reader of many records in a row (a drainer sending a
//     batch) reads them with one pread per run (Region.ReadViews) rather
//     than through the mapping: on the development machine a read of a
//     mapping costs about 0.5 ms per MiB in page faults (the log takes
//     the pages out again every 8 MiB, above) against 0.07 for pread
//     into a buffer that stays in the cache, and a drainer reading this
//     way spent about 9% less CPU per row on txn-128 (docs/benchmarks.md).
//     It costs a file descriptor per segment held.
//   - A view of a page the kernel cannot read back (a failing disk)
//     kills the process with SIGBUS where a read would have returned
//     EIO; bbolt, which maps its file too, makes the same trade.
//
// # Recovery
//
// Open reads the segments in order and checks every frame. At the first
// damaged one (the file ends inside it, its CRC does not match, its type
// is unknown, it names a seq it cannot) the file is cut there, with one
// warning naming the file and the bytes dropped; nothing after it in that
// file is read, even if intact. At the end of the newest segment this is
// a write a crash interrupted and loses nothing acknowledged (warned
// of, unless the file was reused: Reused files). In the
// middle of an older segment it is damage to the disk: the records after
// it are lost (their releases too, so some released records may come
// back), and the later segments are read as usual. A segment whose header
// is damaged is deleted, with one warning. Records missing between two
// segments that are there (a file gone: fsck's lost+found, an operator)
// get one warning naming the next file, the first seq missing and how
// many are, unless the segment before was cut or deleted above (that
// warning covers them); only the oldest segment is ever deleted, so no
// other gap is possible. A gap left by a cut is warned of again at every
// later start (nothing on disk says it was), until the older segment is
// deleted. A read that fails (EIO, a file
// system gone) is no damage: Open fails, naming the file, and cuts and
// deletes nothing, so that the records the disk still holds are there
// when it can be read again. Then Open replays the live
// records in seq order, and the writer deletes or compacts what needs it.
//
// # Why a log of our own, not bbolt
//
// BenchmarkAppend and BenchmarkBolt on the 2-core development machine
// (ext4 on a virtual disk; go test -bench . -benchtime=2s), 64
// goroutines appending 200-byte records; "written" is what the process
// had written to storage per record (/proc/self/io):
//
//	                           records/s  fsyncs/s  records/fsync  written
//	qlog                            143k      4.4k             32    336 B
//	qlog, each released             126k      3.9k             32    336 B
//	qlog, NoSync                    598k         0                   209 B
//	bbolt Batch, 64 per commit      125k   2x 2.0k             64   1074 B
//	bbolt, each deleted              80k   2x 2.5k             32   1410 B
//	bbolt Batch, its defaults        5.7k  2x  89              64   1032 B
//
// Runs move by 15% from one to the next. bbolt comes close only with its
// batch size set to the exact number of writers, which a server does not
// know: with its defaults a batch waits 10ms for writers who are not
// coming. A bbolt commit fsyncs twice (pages, then meta) and rewrites
// whole 4 KiB B-tree pages, three times the bytes per record, and a
// delete costs as much as a put, where a release here is a few bytes in
// the next write. The log writes each record once, sequentially, batches
// without being told how many writers there are, and frees space by
// deleting files. So chute keeps its own log.
//
// # Locks
//
// Log.mu guards the segments' live state, the moved map, the pending
// releases, the sizes and the counters; it is held briefly, never across
// I/O. The writer alone touches the files and Log.w. An appendReq is
// answered through its state, an atomic: whichever of the writer and an
// Append whose context ended moves it first decides whether the Append
// gets the result or the writer releases the records.
package qlog
