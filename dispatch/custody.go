package dispatch

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/dispatch/qlog"
	"chute/sink"
)

// A member keeps every message in its custody in the queue log
// (dispatch/qlog) under <DataDir>/queues: the messages of the queues it
// dispatches, the copies it holds for a dispatcher it cannot reach, and
// its backup copies of other dispatchers' messages (backup.go). A message
// is appended before the put, the forward, the hold, the backup frame or
// the handover that brings it is answered, and released once it leaves
// the member's custody: acknowledged, inserted, dropped as a duplicate,
// handed to another member that answered, or a backup copy released. The
// queue keeps the record's seq on the message (message.lseq), held and
// backup copies on theirs (incoming.lseq). The package doc ("On disk")
// has the whole design.

// queueLogDir is where the queue log lives under Config.DataDir, and
// queueLogLock the file whose lock keeps a second process out of it.
const (
	queueLogDir  = "queues"
	queueLogLock = "queues.lock"
)

// Kinds of records, the first byte of each: a message this member
// dispatches or holds for an unreachable dispatcher, and a backup's copy
// of another dispatcher's message (ack=replicated). Both come back as
// held copies: the dispatcher keeps one per id.
const (
	recMessage byte = 1
	recBackup  byte = 2
	// recTried marks a batch a drainer sent to ClickHouse (queue.tried),
	// written before its first attempt and released when it settles: a
	// member killed while the batch was in flight forms it again at its
	// next start, the same rows in the same order, so its dedup token is
	// the first attempt's. It lives as long as the mark: it goes over
	// with a hand-over and is released there.
	recTried byte = 3
	// recMark is the mark of a tried batch that came with a hand-over
	// (incoming.batch): the head row's id and the batch's rows. The
	// member that tried the batch released its recTried once this member
	// answered, so the mark must be on this disk before the answer: a
	// restart before this member's drainer forms the batch again (and
	// writes its own recTried) forms it as the mark says. Written in the
	// append of the head row's record, released as recTried is.
	recMark byte = 4
	// recBackupOf is a backup's copy, as recBackup, that names the
	// dispatcher it was kept for and the run of that dispatcher's
	// process (copyOwner): read back after a restart, the copy is handed
	// to the dispatcher with them, and that run drops what it no longer
	// holds (Manager.dropLeftLocked).
	recBackupOf byte = 5
)

// copyOwner is the dispatcher a backup kept a copy for: its member id
// and the run of its process (its serf boot tag). The copies of one
// backup frame, or read back from the log for one dispatcher's run,
// share one.
type copyOwner struct {
	member uint64
	boot   string
	// readBack says the copies were read back from the queue log as this
	// process started: kept by its run before, the only ones a word of
	// their dispatcher's run replaces (queue.supersedeLocked).
	readBack bool
}

// readBackFor reports whether o is run's, read back from the log.
func (o *copyOwner) readBackFor(run copyOwner) bool {
	return o != nil && o.readBack && o.member == run.member && o.boot == run.boot
}

// same reports whether o and p name one owner, or none: the copies of
// one run come in many frames, each with an owner of its own.
func (o *copyOwner) same(p *copyOwner) bool {
	return o == p || o != nil && p != nil && *o == *p
}

// encodeTried appends the record of tried batch rows of queue name: kind,
// queue, the number of rows and their ids in order, as uvarints. Ids, not
// numbers: a put's record has no number (it is numbered once queued, in
// an order the log's need not be), and a restart numbers the rows again;
// the ids say which rows, and in which order, the batch had. An id of the
// previous id's origin is its difference in N, zigzagged and doubled (one
// byte for a run of one producer's puts); another origin's (or one past
// 2^61 away) is 1, then the origin and N.
func encodeTried(b []byte, name string, rows []row) []byte {
	b = append(b, recTried)
	b = binary.AppendUvarint(b, uint64(len(name)))
	b = append(b, name...)
	b = binary.AppendUvarint(b, uint64(len(rows)))
	var prev MsgID
	for i, r := range rows {
		id := r.m.id
		if d := int64(id.N - prev.N); i > 0 && id.Origin == prev.Origin && d > -1<<61 && d < 1<<61 {
			b = binary.AppendUvarint(b, uint64(d<<1^d>>63)<<1)
		} else {
			b = binary.AppendUvarint(b, 1)
			b = binary.AppendUvarint(b, id.Origin)
			b = binary.AppendUvarint(b, id.N)
		}
		prev = id
	}
	return b
}

// triedRecord is a recTried or recMark record replayed from the queue
// log.
type triedRecord struct {
	ids  []MsgID // of its rows, in order; a recMark's: the head row's only
	rows int     // the batch's rows: len(ids), or a recMark's count
	lseq uint64
}

// encodeMark appends the recMark record of in, the head of a tried batch
// of in.batch rows of queue name: kind, queue, rows, the head's id, as
// uvarints.
func encodeMark(b []byte, name string, in incoming) []byte {
	b = append(b, recMark)
	b = binary.AppendUvarint(b, uint64(len(name)))
	b = append(b, name...)
	b = binary.AppendUvarint(b, uint64(in.batch))
	b = binary.AppendUvarint(b, in.id.Origin)
	return binary.AppendUvarint(b, in.id.N)
}

// markSize is the bytes of encodeMark's record of in.
func markSize(name string, in incoming) int {
	return 1 + uvarintLen(uint64(len(name))) + len(name) + uvarintLen(uint64(in.batch)) + uvarintLen(in.id.Origin) + uvarintLen(in.id.N)
}

// decodeMark decodes a record encodeMark made.
func decodeMark(rec []byte) (name string, t triedRecord, err error) {
	if len(rec) == 0 || rec[0] != recMark {
		return "", t, errBadRecord
	}
	rd := recordReader{p: rec[1:]}
	name = rd.str()
	rows := rd.uv()
	id := MsgID{Origin: rd.uv(), N: rd.uv()}
	if rd.err != nil || len(rd.p) != 0 || rows == 0 || rows > maxBatchRows || !validQueueName(name) {
		return "", triedRecord{}, errBadRecord
	}
	return name, triedRecord{ids: []MsgID{id}, rows: int(rows)}, nil
}

// decodeTried decodes a record encodeTried made.
func decodeTried(rec []byte) (name string, t triedRecord, err error) {
	if len(rec) == 0 || rec[0] != recTried {
		return "", t, errBadRecord
	}
	rd := recordReader{p: rec[1:]}
	name = rd.str()
	count := rd.uv()
	// Each id takes a byte at least: a count past the bytes left is no
	// record of this kind, and is not allocated for.
	if rd.err != nil || count == 0 || count > maxBatchRows || count > uint64(len(rd.p)) || !validQueueName(name) {
		return "", t, errBadRecord
	}
	t.ids = make([]MsgID, 0, count)
	var prev MsgID
	for range count {
		v := rd.uv()
		var id MsgID
		switch {
		case v == 1:
			id = MsgID{Origin: rd.uv(), N: rd.uv()}
		case v&1 == 0 && len(t.ids) > 0:
			z := v >> 1
			id = MsgID{Origin: prev.Origin, N: prev.N + uint64(int64(z>>1)^-int64(z&1))}
		default:
			rd.err = errBadRecord
		}
		if rd.err != nil {
			return "", triedRecord{}, errBadRecord
		}
		t.ids = append(t.ids, id)
		prev = id
	}
	if len(rd.p) != 0 {
		return "", triedRecord{}, errBadRecord
	}
	t.rows = len(t.ids)
	return name, t, nil
}

// markRecovered puts the tried batches the log replayed back among the
// recovered messages of their queues: each batch's rows, found by id,
// move together to where the first of them lies, in the batch's order,
// the first marked (incoming.batch), so that they are numbered again in
// that order and form the batch again. A hand-over's mark (recMark) names
// the head only: the head is marked, and the rows after it in number
// order form the batch, as before the restart. A batch some row of which
// is gone has its record released.
func markRecovered(l *qlog.Log, recovered map[string][]incoming, tried map[string][]triedRecord) {
	for name, marks := range tried {
		msgs := recovered[name]
		at := make(map[MsgID]int) // the ids of the marks' rows: their index in msgs, -1 not found
		for _, t := range marks {
			for _, id := range t.ids {
				at[id] = -1
			}
		}
		for i := range msgs {
			if j, ok := at[msgs[i].id]; ok && j < 0 {
				at[msgs[i].id] = i
			}
		}
		starts := make(map[int]triedRecord) // by the index of a complete mark's first-lying row
		moved := make(map[int]bool)         // indexes of the rows of complete marks
		for _, t := range marks {
			first, n := len(msgs), 0
			for _, id := range t.ids {
				i := at[id]
				if i < 0 || moved[i] {
					break // a row gone, or another mark's
				}
				moved[i] = true
				first, n = min(first, i), n+1
			}
			if n < len(t.ids) {
				for _, id := range t.ids[:n] {
					delete(moved, at[id])
				}
				releaseLog(l, t.lseq)
				continue
			}
			starts[first] = t
		}
		if len(starts) == 0 {
			continue
		}
		out := make([]incoming, 0, len(msgs))
		for i := range msgs {
			if t, ok := starts[i]; ok {
				for k, id := range t.ids {
					in := msgs[at[id]]
					if k == 0 {
						in.batch, in.batchRec = t.rows, t.lseq
					}
					out = append(out, in)
				}
			}
			if !moved[i] {
				out = append(out, msgs[i])
			}
		}
		recovered[name] = out
	}
}

// persistTried appends the record of the tried batch rows of queue name
// and returns its number in the log once it is on disk; 0 without a
// queue log, or when the append failed (the batch goes without one).
func (m *Manager) persistTried(ctx context.Context, name string, rows []row) uint64 {
	if m.qlog == nil || len(rows) == 0 {
		return 0
	}
	seq, err := m.qlog.Append(ctx, encodeTried(nil, name, rows))
	if err != nil {
		m.log.Debug("a batch's mark could not be written to the queue log; a restart forms its rows anew", "queue", name, "err", err)
		return 0
	}
	return seq
}

// encodeRecord appends the record of message in of queue name to b:
// kind, queue, id, number (0: none), tail and value, the lengths and
// integers as uvarints. A backup's copy with its owner is written as
// recBackupOf, the owner's member and run after the kind.
func encodeRecord(b []byte, kind byte, name string, in incoming) []byte {
	if kind == recBackup && in.owner != nil {
		b = append(b, recBackupOf)
		b = binary.AppendUvarint(b, in.owner.member)
		b = binary.AppendUvarint(b, uint64(len(in.owner.boot)))
		b = append(b, in.owner.boot...)
	} else {
		b = append(b, kind)
	}
	b = binary.AppendUvarint(b, uint64(len(name)))
	b = append(b, name...)
	b = binary.AppendUvarint(b, in.id.Origin)
	b = binary.AppendUvarint(b, in.id.N)
	b = binary.AppendUvarint(b, in.seq)
	b = binary.AppendUvarint(b, uint64(len(in.tail)))
	b = append(b, in.tail...)
	b = binary.AppendUvarint(b, uint64(len(in.value)))
	return append(b, in.value...)
}

// errBadRecord: a record of the queue log that does not decode. The log
// checksums every record, so this is a record of another version.
var errBadRecord = errors.New("dispatch: queue log record does not decode")

// decodeRecord decodes a record encodeRecord made. The tail is a copy;
// the value is a copy too unless r, the log's mapping of rec, is given:
// it is then rec's bytes, kept by in.region.
func decodeRecord(rec []byte, r *qlog.Region) (name string, in incoming, err error) {
	if len(rec) == 0 || rec[0] != recMessage && rec[0] != recBackup && rec[0] != recBackupOf {
		return "", incoming{}, errBadRecord
	}
	rd := recordReader{p: rec[1:]}
	if rec[0] == recBackupOf {
		in.owner = &copyOwner{member: rd.uv(), boot: rd.str()}
	}
	name = rd.str()
	in.id.Origin = rd.uv()
	in.id.N = rd.uv()
	in.seq = rd.uv()
	in.tail = rd.str()
	n := rd.uv()
	p, err := rd.p, rd.err
	if err == nil && n == uint64(len(p)) && r != nil {
		in.value, in.region, p = p, r, nil
	} else if err == nil && n <= uint64(len(p)) {
		in.value, p = append([]byte(nil), p[:n]...), p[n:]
	} else {
		err = errBadRecord
	}
	if err == nil && len(p) != 0 {
		err = errBadRecord
	}
	if err == nil && !validQueueName(name) {
		err = errBadRecord
	}
	return name, in, err
}

// recordReader reads the uvarints and length-prefixed strings of a
// queue log record. Once one does not decode, err is errBadRecord and
// every later read is empty.
type recordReader struct {
	p   []byte
	err error
}

func (r *recordReader) uv() uint64 {
	v, n := binary.Uvarint(r.p)
	if n <= 0 {
		r.err, r.p = errBadRecord, nil
		return 0
	}
	r.p = r.p[n:]
	return v
}

// str reads a length and that many bytes, as a string (a copy).
func (r *recordReader) str() string {
	n := r.uv()
	if r.err != nil || n > uint64(len(r.p)) {
		r.err, r.p = errBadRecord, nil
		return ""
	}
	s := string(r.p[:n])
	r.p = r.p[n:]
	return s
}

// openLog locks and opens the queue log under cfg.DataDir and returns
// it, the lock (closed after the log) and the messages it replayed, by
// queue, in log order; nil log when DataDir is empty.
func openLog(cfg Config) (l *qlog.Log, lock *os.File, _ map[string][]incoming, err error) {
	if cfg.DataDir == "" {
		return nil, nil, nil, nil
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, nil, nil, fmt.Errorf("dispatch: data dir: %w", err)
	}
	if lock, err = lockDir(filepath.Join(cfg.DataDir, queueLogLock)); err != nil {
		return nil, nil, nil, fmt.Errorf("dispatch: queue log: %w", err)
	}
	defer func() {
		if err != nil {
			_ = lock.Close()
		}
	}()
	lcfg := qlog.DefaultConfig()
	lcfg.Dir = filepath.Join(cfg.DataDir, queueLogDir)
	lcfg.NoSync = cfg.NoSync
	lcfg.QuotaBytes = cfg.QuotaBytes
	lcfg.SegmentBytes = cfg.QueueLogSegmentBytes
	lcfg.Logger = cfg.Logger.With("log", lcfg.Dir)
	// A record holds a value and its key: leave room for both.
	lcfg.MaxRecordBytes = max(lcfg.MaxRecordBytes, cfg.MaxRequestBytes+cfg.MaxKeyBytes+1024)
	recovered := make(map[string][]incoming)
	tried := make(map[string][]triedRecord)
	owners := make(map[copyOwner]*copyOwner) // one for the copies of each dispatcher's run
	bad := 0
	l, err = qlog.OpenMapped(lcfg, func(seq uint64, rec []byte, r *qlog.Region) error {
		if len(rec) > 0 && (rec[0] == recTried || rec[0] == recMark) {
			decode := decodeTried
			if rec[0] == recMark {
				decode = decodeMark
			}
			name, t, err := decode(rec)
			if err != nil {
				bad++
				return nil
			}
			t.lseq = seq
			tried[name] = append(tried[name], t)
			return nil
		}
		name, in, err := decodeRecord(rec, r)
		if err != nil {
			bad++
			return nil // kept in the log, unreleased, for a version that reads it
		}
		in.lseq = seq
		if in.owner != nil {
			in.owner.readBack = true
			o, ok := owners[*in.owner]
			if !ok {
				o = in.owner
				owners[*o] = o
			}
			in.owner = o
		}
		recovered[name] = append(recovered[name], in)
		return nil
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("dispatch: queue log: %w", err)
	}
	markRecovered(l, recovered, tried)
	if bad > 0 {
		// Checksummed, so written by another version: not delivered by
		// this one, though kept on disk.
		cfg.Logger.Error("queue log records this version cannot read are not delivered; they stay in the log", "records", bad)
	}
	return l, lock, recovered, nil
}

// loadRecovered hands the messages the queue log replayed to their
// queues as held copies: the reconcile loop claims the queues nobody
// dispatches (the copies join the queue here) or hands them to the
// dispatcher. Each record stays live until the message leaves this
// member's custody.
func (m *Manager) loadRecovered() {
	names := make([]string, 0, len(m.recovered))
	for name := range m.recovered {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		msgs := m.recovered[name]
		q := m.queueFor(name)
		q.mu.Lock()
		q.holdLocked(msgs)
		q.mu.Unlock()
		m.log.Info("queue recovered from the data dir", "queue", name, "rows", len(msgs))
	}
	m.recovered = nil
}

// persist appends msgs to the queue log, unless they are in it already
// (lseq set), and sets their lseq, with the marks of the tried batches
// they head that have no record yet (persistGroups). It returns once they
// are on disk (fsynced, unless NoSync). Memory only (no DataDir), it does
// nothing.
func (m *Manager) persist(ctx context.Context, name string, msgs []incoming) error {
	return m.persistAs(ctx, recMessage, name, msgs)
}

// persistAs is persist for records of kind.
func (m *Manager) persistAs(ctx context.Context, kind byte, name string, msgs []incoming) error {
	return m.persistGroups(ctx, kind, []custodyGroup{{name: name, msgs: msgs}})
}

// custodyGroup is messages of one queue to append.
type custodyGroup struct {
	name string
	msgs []incoming
}

// persistGroups is persist for the messages of several queues, in one
// append: one fsync. A message of kind recMessage that heads a tried
// batch (incoming.batch) with no record of its mark gets one (recMark)
// in the same append, in batchRec, whether its own record is written now
// (a hand-over, a hold) or was before (a backup's copy it takes over).
func (m *Manager) persistGroups(ctx context.Context, kind byte, groups []custodyGroup) error {
	if m.qlog == nil {
		return nil
	}
	size, n := 0, 0
	for _, g := range groups {
		for i := range g.msgs {
			if g.msgs[i].lseq == 0 {
				size += recordSize(kind, g.name, g.msgs[i])
				n++
			}
			if needsMark(kind, g.msgs[i]) {
				size += markSize(g.name, g.msgs[i])
				n++
			}
		}
	}
	if n == 0 {
		return nil
	}
	// One buffer for the batch's records, reused: the log copies them
	// before AppendMapped returns, and a message's value is either its
	// view in the log or stays the put's own bytes, never the buffer.
	a := m.getAppendBufs(size, n)
	buf, recs, at := a.buf, a.recs, a.at
	for _, g := range groups {
		for i := range g.msgs {
			if g.msgs[i].lseq == 0 {
				start := len(buf)
				buf = encodeRecord(buf, kind, g.name, g.msgs[i])
				recs = append(recs, buf[start:])
				at = append(at, &g.msgs[i])
			}
			if needsMark(kind, g.msgs[i]) {
				start := len(buf)
				buf = encodeMark(buf, g.name, g.msgs[i])
				recs = append(recs, buf[start:])
				at = append(at, &g.msgs[i])
			}
		}
	}
	first, views, region, err := m.qlog.AppendMapped(ctx, recs, a.views)
	if err != nil {
		// Not reused: after ctx ended the writer may still be copying.
		return m.logError(groups[0].name, err)
	}
	defer m.putAppendBufs(a, buf, recs, at, views)
	for j, in := range at {
		if in.lseq != 0 {
			// Its mark's: a message's own record comes first, if any.
			in.batchRec = first + uint64(j)
			continue
		}
		in.lseq = first + uint64(j)
		// The value now lives in the log's mapping, which the message
		// keeps (region); the put's copy becomes garbage.
		if region != nil && views[j] != nil {
			v := views[j]
			in.value, in.region = v[len(v)-len(in.value):], region
		}
	}
	return nil
}

// needsMark reports whether in, appended as a record of kind, heads a
// tried batch whose mark has no record here yet: one that came with a
// hand-over or a hold, or a backup's copy taken over. A backup's copy it
// keeps has its mark in memory only (backupSet.keep).
func needsMark(kind byte, in incoming) bool {
	return kind == recMessage && in.batch > 0 && in.batchRec == 0
}

// appendBufs are the buffers persistGroups encodes an append's records
// in, kept in Manager.appends between appends.
type appendBufs struct {
	buf   []byte
	recs  [][]byte
	at    []*incoming
	views [][]byte // the log's views of the records (qlog.Log.AppendMapped)
}

// maxPooledAppend is the largest record buffer Manager.appends keeps: the
// records of any peer frame fit (maxFrameBytes of values and keys, and
// each record's name, ids and framing). A dispatcher under load appends
// forward frames of megabytes, one after another; left to the collector
// each was a fresh buffer, zeroed, and a fifth of what the dispatcher
// allocated (three nodes, txn-128).
const maxPooledAppend = 2 * maxFrameBytes

// getAppendBufs returns empty buffers for n records of size bytes in all.
func (m *Manager) getAppendBufs(size, n int) *appendBufs {
	a, _ := m.appends.Get().(*appendBufs)
	if a == nil {
		a = &appendBufs{}
	}
	if cap(a.buf) < size {
		a.buf = make([]byte, 0, size)
	}
	if cap(a.recs) < n {
		a.recs, a.at, a.views = make([][]byte, 0, n), make([]*incoming, 0, n), make([][]byte, 0, n)
	}
	a.buf, a.recs, a.at, a.views = a.buf[:0], a.recs[:0], a.at[:0], a.views[:0]
	return a
}

// putAppendBufs hands back a's buffers, as last used, for the next
// append: cleared of pointers, so they keep no message or mapping alive.
func (m *Manager) putAppendBufs(a *appendBufs, buf []byte, recs [][]byte, at []*incoming, views [][]byte) {
	if cap(buf) > maxPooledAppend {
		return
	}
	clear(recs)
	clear(at)
	clear(views)
	a.buf, a.recs, a.at, a.views = buf[:0], recs[:0], at[:0], views[:0]
	m.appends.Put(a)
}

// recordSize is the bytes of in's record of kind and queue name, as
// encodeRecord makes it.
func recordSize(kind byte, name string, in incoming) int {
	n := 1 + uvarintLen(uint64(len(name))) + len(name) + uvarintLen(in.id.Origin) + uvarintLen(in.id.N) + uvarintLen(in.seq) +
		uvarintLen(uint64(len(in.tail))) + len(in.tail) + uvarintLen(uint64(len(in.value))) + len(in.value)
	if kind == recBackup && in.owner != nil {
		n += uvarintLen(in.owner.member) + uvarintLen(uint64(len(in.owner.boot))) + len(in.owner.boot)
	}
	return n
}

// uvarintLen is the bytes of x as a uvarint.
func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// rehomeValues copies to the heap the values still in the mappings of
// segments the queue log deleted: such a mapping keeps the deleted
// file's disk space until nothing references it, and a message can stay
// queued long after its record was moved by compaction. It runs in the
// reconcile loop, and walks the queues only when a segment was deleted
// since its last run. Of a ClickHouse queue it copies the rows not yet
// delivered to the drainer, and asks the drainer for the others
// (rehomeDrained): a batch in flight reads its rows' values without the
// queue's lock. Left alone, a row queued while ClickHouse is down kept a
// deleted segment on disk (64 MiB), past --quota-backend-bytes.
func (m *Manager) rehomeValues() {
	if m.qlog == nil {
		return
	}
	deleted := m.qlog.Stats().Deleted
	if deleted == m.rehomed {
		return
	}
	m.rehomed = deleted
	for _, q := range m.snapshot() {
		_, drained := sink.TableOf(q.name)
		q.mu.Lock()
		for _, msg := range q.msgs.all() {
			if !drained || msg.state != msgDrained {
				msg.rehome()
			}
		}
		rehomeIncoming(q.held)
		q.mu.Unlock()
	}
	m.mu.RLock()
	for _, d := range m.drainers {
		select {
		case d.rehome <- struct{}{}:
		default:
		}
	}
	m.mu.RUnlock()
	m.backupMu.Lock()
	for _, set := range m.backups {
		for seq, in := range set.msgs {
			if in.region.Deleted() {
				in.value, in.region = slices.Clone(in.value), nil
				set.msgs[seq] = in
			}
		}
	}
	m.backupMu.Unlock()
}

// rehomeIncoming is rehomeValues for copies held.
func rehomeIncoming(msgs []incoming) {
	for i := range msgs {
		if msgs[i].region.Deleted() {
			msgs[i].value, msgs[i].region = slices.Clone(msgs[i].value), nil
		}
	}
}

// unpersist releases the records persist wrote for msgs that were not
// kept after all, their marks' too, and clears their lseq and batchRec.
func (m *Manager) unpersist(msgs []incoming) {
	for i := range msgs {
		m.release(msgs[i].lseq, msgs[i].batchRec)
		msgs[i].lseq, msgs[i].batchRec = 0, 0
	}
}

// release releases records of the queue log; zeros (no record) are
// skipped. It never blocks on I/O, so a queue's lock may be held.
func (m *Manager) release(seqs ...uint64) {
	releaseLog(m.qlog, seqs...)
}

// releaseLog is release for the queue log l, nil when there is none.
func releaseLog(l *qlog.Log, seqs ...uint64) {
	if l == nil {
		return
	}
	for _, s := range seqs {
		if s != 0 {
			_ = l.Release(s) // ErrClosed only: the record is replayed, delivered again at worst
		}
	}
}

// logError maps an error of the queue log to the put's: a full disk or
// quota is etcd's "database space exceeded" (and OnNoSpace is called),
// anything else Unavailable; a log failed for good calls OnLogFailed.
func (m *Manager) logError(name string, err error) error {
	switch {
	case errors.Is(err, qlog.ErrNoSpace):
		if m.cfg.OnNoSpace != nil {
			m.cfg.OnNoSpace()
		}
		m.log.Log(context.Background(), m.warns.level("nospace "+name, m.clock.Now()), "queue log full; puts refused", "queue", name, "err", err)
		return rpctypes.ErrGRPCNoSpace
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	case errors.Is(err, qlog.ErrTooLarge):
		return status.Error(codes.InvalidArgument, "etcdserver: "+err.Error())
	case errors.Is(err, qlog.ErrFailed):
		m.logFailedOnce.Do(func() {
			m.log.Error("queue log failed: puts are refused until the node starts again", "err", err)
			if m.cfg.OnLogFailed != nil {
				m.cfg.OnLogFailed(err)
			}
		})
	}
	m.log.Log(context.Background(), m.warns.level("qlog "+name, m.clock.Now()), "queue log append failed", "queue", name, "err", err)
	return status.Error(codes.Unavailable, "dispatch: queue log: "+err.Error())
}

// errRowsLost: acknowledged messages were dropped: left at Shutdown
// without a data dir to keep them, or dropped while running.
var errRowsLost = errors.New("dispatch: acknowledged messages lost at shutdown")

// closeLog ends the queue log once nothing runs: what the queues still
// hold stays on disk for the next start, logged per queue. Without a
// data dir those messages are lost: each queue's loss is logged at
// ERROR and the error says so.
func (m *Manager) closeLog() error {
	var lost []error
	for _, q := range m.snapshot() {
		q.mu.Lock()
		rows, held := q.msgs.len(), len(q.held)
		q.mu.Unlock()
		if rows+held == 0 {
			continue
		}
		if m.qlog != nil {
			m.log.Info("rows left on disk for the next start", "queue", q.name, "rows", rows+held)
			continue
		}
		m.log.Error("acknowledged messages lost: no data dir keeps them", "queue", q.name, "rows", rows+held)
		lost = append(lost, fmt.Errorf("%w: %s: %d", errRowsLost, q.name, rows+held))
	}
	if n := m.dropped.Load(); n > 0 {
		lost = append(lost, fmt.Errorf("%w: %d dropped while running (logged each)", errRowsLost, n))
	}
	if m.qlog != nil {
		if err := m.qlog.Close(); err != nil {
			lost = append(lost, fmt.Errorf("dispatch: closing the queue log: %w", err))
		}
		_ = m.qlogLock.Close() // after the log: no other process writes it before
	}
	return errors.Join(lost...)
}
