package dispatch

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"chute/kv"
	"chute/sink"
)

// Dead letters are ordinary keys, /q/{name}/dlq/{seq}, that users read and
// delete with any etcd client; a queue's dispatcher writes them and keeps
// them bounded. Its drainer writes the letters of one bisected batch, and
// the deletions of the oldest letters they push past dlq_max_rows, in one
// write (RecordStore.Apply: one raft entry), cut into several only past
// letterWriteBytes or letterWriteOps; a letter that the same write would
// delete is never written. Before it deletes anything it counts the
// letters again from the key space, so letters a user deleted are not
// counted against the bound. The drainer also sweeps, once per sweepEvery
// on the manager's clock (asked by the reconcile loop), for letters past
// dlq_ttl and over dlq_max_rows (after a lower max was set), deleting at
// most sweepMax per round. Every letter deleted or never written counts
// in chute.dead_letters.dropped (by queue and reason), and a WARN per
// queue at most once per dropWarnEvery says how many went since the last.

const (
	// defaultDeadLetterMaxRows and defaultDeadLetterTTL are
	// Config.DeadLetterMaxRows and DeadLetterTTL when zero.
	defaultDeadLetterMaxRows = 10_000
	defaultDeadLetterTTL     = 7 * 24 * time.Hour
	// maxDeadLetterRows bounds dlq_max_rows: the drainer lists a
	// queue's letters in memory when it trims them.
	maxDeadLetterRows = 1_000_000
	// minDeadLetterTTL and maxDeadLetterTTL bound a dlq_ttl other than
	// 0: the sweep runs once a minute.
	minDeadLetterTTL = time.Minute
	maxDeadLetterTTL = 10 * 365 * 24 * time.Hour
	// letterWriteBytes and letterWriteOps bound one write of letters:
	// one raft entry, well under raftkv's DefaultMaxCommandBytes
	// (2.25 MiB), so that a flood of bad rows makes few, modest entries.
	// A write is not held to the client's 128 ops per txn, which bounds
	// requests, not the member's own writes.
	letterWriteBytes = 1 << 20
	letterWriteOps   = 10_000
	// sweepEvery is how often a drainer looks for letters to delete.
	sweepEvery = time.Minute
	// sweepWake is how often the reconcile loop wakes the drainers to
	// sweep: their sweeps and warnings are due once a minute, and waking
	// each at every round (100 ms) cost a member with 2000 idle
	// ClickHouse queues a quarter of a core.
	sweepWake = time.Second
	// sweepMax bounds the letters one sweep reads the time of, and those
	// it deletes.
	sweepMax = 1000
	// dropWarnEvery is how often dropped letters of one queue are
	// logged at WARN.
	dropWarnEvery = time.Minute
)

// Reasons a dead letter is dropped: the label of chute.dead_letters.dropped.
const (
	dropMaxRows = "max_rows"
	dropTTL     = "ttl"
)

// parseLetterTTL parses a dlq_ttl: "0s" (or any zero duration) keeps
// letters forever.
func parseLetterTTL(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("dlq_ttl %q: want a duration such as \"168h\", or \"0s\" to keep dead letters forever", s)
	}
	if d != 0 && (d < minDeadLetterTTL || d > maxDeadLetterTTL) {
		return 0, fmt.Errorf("dlq_ttl %v: want 0 (forever) or %v to %v", d, minDeadLetterTTL, maxDeadLetterTTL)
	}
	return d, nil
}

// letter is the JSON of a dead letter. Time comes first, so the sweep
// reads it without decoding the row (letterTime).
type letter struct {
	Time  time.Time `json:"time"` // when it was written, UTC, on the dispatcher's clock
	Table string    `json:"table"`
	Key   string    `json:"key"`
	Code  int       `json:"code"`
	Error string    `json:"error"`
	Row   string    `json:"row,omitempty"`
	// RowJSON holds the row as it was put, a JSON object, in place of
	// Row when the row escaped as a string would make the letter larger
	// than maxLetterBytes (encodeLetter).
	RowJSON json.RawMessage `json:"row_json,omitempty"`
	// RowBytes is the row's length when even that was too large (a
	// --max-request-bytes raised past maxLetterBytes): Row holds its
	// start only.
	RowBytes int `json:"row_bytes,omitempty"`
}

// maxLetterBytes bounds a dead letter: one write of its own (splitWrites)
// must stay within raftkv's DefaultMaxCommandBytes (2.25 MiB) with its
// key and the command's encoding, or the key space refused it at every
// try and the row stayed queued for ever, holding each batch it was in.
const maxLetterBytes = 2 << 20

// encodeLetter returns l as JSON within maxLetterBytes. The row goes as a
// string (Row), unescaped but for what JSON must escape: a quote or a
// backslash doubles in it, and Go's default of \u003c for '<' made a row
// of 600 KB of markup a letter of 2.6 MB. A row still too large goes as
// the JSON object it is (RowJSON), and one larger than a letter holds
// (only with --max-request-bytes raised) is cut, its length in RowBytes.
func encodeLetter(l letter) []byte {
	row := l.Row
	v := marshalLetter(l)
	if len(v) > maxLetterBytes {
		l.Row, l.RowJSON = "", json.RawMessage(row)
		if v = marshalLetter(l); v == nil || len(v) > maxLetterBytes {
			// What the rest takes, and room for "row_bytes"; the row's
			// start escaped is at most twice its length.
			rest := len(marshalLetter(letter{Time: l.Time, Table: l.Table, Key: l.Key, Code: l.Code, Error: l.Error})) + 64
			cut := min(max(maxLetterBytes-rest, 0)/2, len(row))
			for cut > 0 && cut < len(row) && !utf8.RuneStart(row[cut]) {
				cut--
			}
			l.Row, l.RowJSON, l.RowBytes = row[:cut], nil, len(row)
			v = marshalLetter(l)
		}
	}
	return v
}

// marshalLetter is json.Marshal of l without escaping HTML; nil when l
// does not encode (a RowJSON that is not JSON).
func marshalLetter(l letter) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(l); err != nil {
		return nil
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// letterTime returns the time a stored letter was written; false when it
// has none (a letter of an older version, or a user's): such a letter
// never expires, and counts against dlq_max_rows.
func letterTime(v []byte) (time.Time, bool) {
	const head = `{"time":"`
	if s, ok := bytes.CutPrefix(v, []byte(head)); ok {
		if end := bytes.IndexByte(s, '"'); end > 0 {
			if t, err := time.Parse(time.RFC3339Nano, string(s[:end])); err == nil {
				return t, true
			}
		}
	}
	var l struct {
		Time *time.Time `json:"time"`
	}
	if json.Unmarshal(v, &l) != nil || l.Time == nil {
		return time.Time{}, false
	}
	return *l.Time, true
}

// letterPrefix is where a queue's dead letters are.
func letterPrefix(queue string) string { return "/q/" + queue + "/dlq/" }

// letterBook is what a drainer knows of its queue's dead letters, owned
// by its loop.
type letterBook struct {
	loaded bool
	// seqs are the numbers of the letters, ascending; it may still hold
	// letters a user deleted since it was loaded.
	seqs []uint64

	dropped  map[string]int // letters dropped since the last WARN, by reason
	lastWarn time.Time      // of dropped letters
	next     time.Time      // of the next sweep
}

// loadLetters reads the queue's letters from the key space; it returns
// their values, by number, which are the store's (never modified).
func (d *drainer) loadLetters() map[uint64][]byte {
	prefix := letterPrefix(d.q.name)
	all := d.m.records.Prefix(prefix)
	vals := make(map[uint64][]byte, len(all))
	seqs := make([]uint64, 0, len(all))
	for k, v := range all {
		if seq, ok := parseSeq(k[len(prefix):]); ok {
			seqs = append(seqs, seq)
			vals[seq] = v
		}
	}
	slices.Sort(seqs)
	d.letters.seqs, d.letters.loaded = seqs, true
	return vals
}

// trimLetters returns which letters to drop so that at most limit remain of
// have (stored) and add (to be written), both ascending and disjoint: the
// oldest by number, compared as numbers. del are stored letters to
// delete, oldest first; skip[i] reports that add[i] is not to be written.
func trimLetters(have, add []uint64, limit int) (del []uint64, skip []bool) {
	skip = make([]bool, len(add))
	over := len(have) + len(add) - limit
	i, j := 0, 0
	for ; over > 0; over-- {
		if j == len(add) || (i < len(have) && have[i] < add[j]) {
			del = append(del, have[i])
			i++
		} else {
			skip[j] = true
			j++
		}
	}
	return del, skip
}

// deadLetter is a refused row about to be stored: rows[index] of the
// batch.
type deadLetter struct {
	index int
	seq   uint64
	key   string
	value []byte
	skip  bool // not written: the oldest past dlq_max_rows
}

// storeLetters stores the rows ClickHouse refused in a batch as dead
// letters, deleting the oldest letters past the queue's dlq_max_rows in
// the same write, and reports the indexes (into rows) of the refused rows
// that are not settled: those whose letter was not written stay queued, to
// be refused and stored again after a pause, as a put answered OK must
// not be lost for want of space (a NOSPACE alarm, until it is disarmed)
// or of a leader (an election, a partition, a timeout, the node
// stopping).
func (d *drainer) storeLetters(ctx context.Context, rows []row, refused []sink.Refused, target string, ep sink.Endpoint) (waiting map[int]bool) {
	if len(refused) == 0 {
		return nil
	}
	m := d.m
	now := m.clock.Now().UTC()
	limit := m.settingsOf(d.q.name).DeadLetterMaxRows
	letters := make([]deadLetter, 0, len(refused))
	for _, ref := range refused {
		r := rows[ref.Index]
		v := encodeLetter(letter{Time: now, Table: target, Key: r.m.tail, Code: ref.Result.Code,
			Error: sink.Redact(cmp.Or(ref.Result.Detail, ref.Result.Message), ep), Row: string(r.m.value)})
		letters = append(letters, deadLetter{index: ref.Index, seq: r.seq, key: DeadLetterKey(d.q.name, r.seq), value: v})
	}
	slices.SortFunc(letters, func(a, b deadLetter) int { return cmp.Compare(a.seq, b.seq) })
	add := make([]uint64, len(letters))
	for i, l := range letters {
		add[i] = l.seq
	}
	b := &d.letters
	if !b.loaded || len(b.seqs)+len(add) > limit {
		d.loadLetters() // a user may have deleted some: count them again before deleting any
	}
	// A letter written again (a batch refused again after a handover)
	// replaces the stored one.
	have := slices.DeleteFunc(slices.Clone(b.seqs), func(s uint64) bool { _, found := slices.BinarySearch(add, s); return found })
	del, skip := trimLetters(have, add, limit)
	var puts []kv.KeyValue
	var put []deadLetter
	skipped := 0
	for i := range letters {
		l := &letters[i]
		if l.skip = skip[i]; l.skip {
			skipped++
			continue
		}
		puts = append(puts, kv.KeyValue{Key: l.key, Value: l.value})
		put = append(put, *l)
	}
	deletes := make([]string, len(del))
	for i, s := range del {
		deletes[i] = DeadLetterKey(d.q.name, s)
	}
	// Its own bound: the bisection may have spent the insert's.
	ctx = context.WithoutCancel(ctx)
	off, stored, deleted := 0, 0, 0
	waiting = make(map[int]bool)
	for i, w := range splitWrites(puts, deletes) {
		wctx, cancel := context.WithTimeout(ctx, recordWriteTimeout)
		err := m.records.Apply(wctx, w.puts, w.deletes)
		cancel()
		if err == nil {
			stored += len(w.puts)
			deleted += len(w.deletes)
			off += len(w.puts)
			continue
		}
		// This write and the ones after it (also puts) wait; so do the
		// letters not to be written at all, unless an earlier write
		// went: the next try trims again. A write that timed out may
		// still be committed: the letter written again replaces it.
		for _, l := range put[off:] {
			waiting[l.index] = true
		}
		if i == 0 {
			for _, l := range letters {
				if l.skip {
					waiting[l.index] = true
				}
			}
			skipped = 0
		}
		msg := "rows refused by ClickHouse; dead letters not written, the rows stay queued and are tried again"
		if errors.Is(err, kv.ErrNoSpace) {
			msg = "rows refused by ClickHouse; dead letters wait for the NOSPACE alarm to be disarmed, the rows stay queued"
		}
		m.log.Log(ctx, m.warns.level("dead letter not written "+d.q.name, m.clock.Now()), msg,
			"queue", d.q.name, "table", target, "rows", len(put)-off, "code", refused[0].Result.Code, "err", err)
		b.loaded = false
		d.settleLetters(letters, waiting, stored, deleted, skipped, target, refused[0].Result.Code)
		return waiting
	}
	kept := slices.DeleteFunc(have, func(s uint64) bool { _, found := slices.BinarySearch(del, s); return found })
	for _, l := range put {
		kept = append(kept, l.seq)
	}
	slices.Sort(kept)
	b.seqs = kept
	d.settleLetters(letters, waiting, stored, deleted, skipped, target, refused[0].Result.Code)
	return waiting
}

// settleLetters notes the refused rows that are settled (for puts waiting
// for ack=inserted) and counts and logs the letters written and dropped;
// the log names the table and the first refused row's code.
func (d *drainer) settleLetters(letters []deadLetter, waiting map[int]bool, stored, deleted, skipped int, target string, code int) {
	m := d.m
	d.q.mu.Lock()
	for _, l := range letters {
		switch {
		case waiting[l.index]:
		case l.skip:
			d.q.refusedLocked(l.seq, l.key+" (not kept: the queue keeps dlq_max_rows)")
		default:
			d.q.refusedLocked(l.seq, l.key)
		}
	}
	d.q.mu.Unlock()
	if stored > 0 {
		m.inserts.deadLettered(context.Background(), d.label, stored)
		m.log.Log(context.Background(), m.warns.level("dead letters "+d.q.name, m.clock.Now()),
			"rows refused by ClickHouse; stored as dead letters", "queue", d.q.name, "table", target, "rows", stored,
			"code", code, "first_key", letters[0].key, "last_key", letters[len(letters)-1].key)
	}
	d.dropLetters(dropMaxRows, deleted+skipped)
}

// dropLetters counts n letters dropped for reason and logs them at WARN
// at most once per dropWarnEvery, with the count since the last WARN.
func (d *drainer) dropLetters(reason string, n int) {
	if n > 0 {
		d.m.letters.drop(d.q.name, reason, n)
		if d.letters.dropped == nil {
			d.letters.dropped = make(map[string]int)
		}
		d.letters.dropped[reason] += n
	}
	b := &d.letters
	now := d.m.clock.Now()
	if len(b.dropped) == 0 || (!b.lastWarn.IsZero() && now.Sub(b.lastWarn) < dropWarnEvery) {
		d.noteSweepDue()
		return
	}
	d.m.log.Warn("dead letters dropped: a queue keeps at most dlq_max_rows of them, for at most dlq_ttl; counts since the last warning",
		"queue", d.q.name, dropMaxRows, b.dropped[dropMaxRows], dropTTL, b.dropped[dropTTL])
	b.lastWarn = now
	clear(b.dropped)
}

// noteSweepDue sets sweepDue from the letters: their next sweep, or
// sooner the WARN of letters dropped since the last one. The caller holds
// lettersMu.
func (d *drainer) noteSweepDue() {
	b := &d.letters
	due := b.next
	if len(b.dropped) > 0 {
		if w := b.lastWarn.Add(dropWarnEvery); w.Before(due) {
			due = w
		}
	}
	if due.IsZero() {
		d.sweepDue.Store(0)
		return
	}
	d.sweepDue.Store(due.UnixNano())
}

// sweepLetters deletes, once per sweepEvery, the queue's letters past its
// dlq_ttl and over its dlq_max_rows, at most sweepMax of each, oldest
// first, in one write. A letter written out of order waits until those
// before it are examined.
func (d *drainer) sweepLetters() {
	m := d.m
	now := m.clock.Now()
	b := &d.letters
	d.dropLetters("", 0) // a WARN that waited for its minute
	if now.Before(b.next) || !m.records.Writable() {
		return
	}
	b.next = now.Add(sweepEvery)
	set := m.settingsOf(d.q.name)
	vals := d.loadLetters()
	seqs := b.seqs
	var del []uint64
	over := min(max(len(seqs)-set.DeadLetterMaxRows, 0), sweepMax)
	del = append(del, seqs[:over]...)
	expired := 0
	if set.DeadLetterTTL > 0 {
		for _, s := range seqs[over:min(len(seqs), over+sweepMax)] {
			if t, ok := letterTime(vals[s]); ok && now.Sub(t) >= set.DeadLetterTTL {
				del = append(del, s)
				expired++
			}
		}
	}
	if len(del) == 0 {
		return
	}
	deletes := make([]string, len(del))
	for i, s := range del {
		deletes[i] = DeadLetterKey(d.q.name, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), recordWriteTimeout)
	defer cancel()
	if err := m.records.Apply(ctx, nil, deletes); err != nil {
		b.loaded = false
		m.log.Warn("dead letters not deleted; trying again at the next sweep", "queue", d.q.name, "letters", len(deletes), "err", err)
		return
	}
	// del is ascending: the letters over the max, then expired ones
	// after them.
	b.seqs = slices.DeleteFunc(slices.Clone(seqs), func(s uint64) bool { _, found := slices.BinarySearch(del, s); return found })
	d.dropLetters(dropMaxRows, over)
	d.dropLetters(dropTTL, expired)
}

// letterWrite is one write of letters.
type letterWrite struct {
	puts    []kv.KeyValue
	deletes []string
}

// splitWrites cuts deletes and puts into writes of at most
// letterWriteBytes and letterWriteOps each, deletes first; a letter
// larger than letterWriteBytes is a write of its own. Nothing gives no
// write.
func splitWrites(puts []kv.KeyValue, deletes []string) []letterWrite {
	var out []letterWrite
	var cur letterWrite
	size, ops := 0, 0
	flush := func() {
		if ops > 0 {
			out = append(out, cur)
		}
		cur, size, ops = letterWrite{}, 0, 0
	}
	add := func(n int) {
		if ops > 0 && (size+n > letterWriteBytes || ops+1 > letterWriteOps) {
			flush()
		}
		size += n
		ops++
	}
	for _, k := range deletes {
		add(len(k))
		cur.deletes = append(cur.deletes, k)
	}
	for _, p := range puts {
		add(len(p.Key) + len(p.Value))
		cur.puts = append(cur.puts, p)
	}
	flush()
	return out
}

// letterMetrics counts dropped dead letters.
type letterMetrics struct {
	dropped metric.Int64Counter
}

func newLetterMetrics(mp metric.MeterProvider) (letterMetrics, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	c, err := mp.Meter("chute/dispatch").Int64Counter("chute.dead_letters.dropped", metric.WithDescription(
		"Dead letters deleted or never written, by queue and reason: max_rows (past dlq_max_rows, oldest first), ttl (older than dlq_ttl)."))
	return letterMetrics{dropped: c}, err
}

func (lm letterMetrics) drop(queue, reason string, n int) {
	lm.dropped.Add(context.Background(), int64(n), metric.WithAttributes(attribute.String("queue", queue), attribute.String("reason", reason)))
}

// sweepDeadLetters asks every drainer, at most every sweepWake, to sweep
// its letters when due; a drainer busy with an insert sweeps after it.
// It never blocks.
func (m *Manager) sweepDeadLetters() {
	now := m.clock.Now()
	if now.Sub(m.sweptAt) < sweepWake {
		return
	}
	m.sweptAt = now
	at := now.UnixNano()
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, d := range m.drainers {
		if at < d.sweepDue.Load() {
			continue // a minute between sweeps: waking 2000 idle drainers every second cost 1% of a core
		}
		select {
		case d.sweep <- struct{}{}:
		default:
		}
	}
}
