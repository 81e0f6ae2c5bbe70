package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"

	"chute/kv"
	"chute/kv/raftkv"
	chuteotel "chute/otel"
)

// TestTrimLetters_oldestFirstNumeric checks that the letters dropped past
// the max are the oldest by number, compared as numbers: as keys, "10"
// sorts before "9".
func TestTrimLetters_oldestFirstNumeric(t *testing.T) {
	tests := []struct {
		name      string
		have, add []uint64
		max       int
		del       []uint64
		skip      []bool
	}{
		{"under the max", []uint64{9}, []uint64{10}, 5, nil, []bool{false}},
		{"9 before 10", []uint64{9, 10, 11}, []uint64{12}, 2, []uint64{9, 10}, []bool{false}},
		{"across a power of ten", []uint64{8, 9, 99, 100}, []uint64{1000}, 3, []uint64{8, 9}, []bool{false}},
		{"new letters dropped too", []uint64{5}, []uint64{6, 7, 8}, 2, []uint64{5}, []bool{true, false, false}},
		{"a new letter older than stored ones", []uint64{10, 20}, []uint64{3, 30}, 2, []uint64{10}, []bool{true, false}},
		{"another epoch's numbers", []uint64{4294967297}, []uint64{2, 4294967298}, 1, []uint64{4294967297}, []bool{true, false}},
		{"keep none", []uint64{1}, []uint64{2}, 0, []uint64{1}, []bool{true}},
	}
	for _, tt := range tests {
		del, skip := trimLetters(tt.have, tt.add, tt.max)
		if !slices.Equal(del, tt.del) || !slices.Equal(skip, tt.skip) {
			t.Errorf("%s: got del %v skip %v, want %v %v", tt.name, del, skip, tt.del, tt.skip)
		}
	}
}

func TestLetterTime(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 5, time.UTC)
	written, _ := json.Marshal(letter{Time: at, Table: "`default`.`t`", Row: `{"a":"\"time\""}`})
	tests := []struct {
		name string
		v    string
		want time.Time
		ok   bool
	}{
		{"as written", string(written), at, true},
		{"fields in another order", `{"row":"{}","time":"2026-03-01T12:00:00.000000005Z"}`, at, true},
		{"no time", `{"table":"t","row":"{}"}`, time.Time{}, false},
		{"not JSON", `hello`, time.Time{}, false},
	}
	for _, tt := range tests {
		got, ok := letterTime([]byte(tt.v))
		if !got.Equal(tt.want) || ok != tt.ok {
			t.Errorf("%s: got %v %v, want %v %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

// TestEncodeLetter_withinOneWrite: a dead letter fits one write of the
// key space whatever its row, up to --max-request-bytes: the row as a
// string when it fits, unescaped but for what JSON must escape (Go's
// \u003c for '<' made 600 KB of markup a letter of 2.6 MB, which the
// key space refused at every try, the row queued for ever); as the JSON
// it is when escaping would not fit; cut, its length noted, past that.
func TestEncodeLetter_withinOneWrite(t *testing.T) {
	if maxLetterBytes+64<<10 > raftkv.DefaultMaxCommandBytes {
		t.Fatalf("maxLetterBytes %d leaves no room in a command of %d", maxLetterBytes, raftkv.DefaultMaxCommandBytes)
	}
	head := letter{Time: time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC), Table: "`default`.`t`", Key: "k", Code: 27, Error: "Code: 27, e.displayText() = DB::Exception: Cannot parse input"}
	markup := `{"id":"x","html":"` + strings.Repeat("<p>&amp;", 75_000) + `"}` // 600 KB
	quotes := `{"id":"x","s":"` + strings.Repeat(`\"`, 700_000) + `"}`         // 1.4 MB, 2.8 escaped
	huge := `{"id":"x","s":"` + strings.Repeat(`é\"`, 1_000_000) + `"}`        // 4 MB: --max-request-bytes raised
	for _, c := range []struct {
		name, row string
		as        string // "row", "row_json" or "cut"
	}{{"markup", markup, "row"}, {"quotes", quotes, "row_json"}, {"past a letter", huge, "cut"}} {
		l := head
		l.Row = c.row
		v := encodeLetter(l)
		if len(v) > maxLetterBytes {
			t.Errorf("%s: a letter of %d bytes, at most %d", c.name, len(v), maxLetterBytes)
		}
		if when, ok := letterTime(v); !ok || !when.Equal(head.Time) {
			t.Errorf("%s: letter time %v %v", c.name, when, ok)
		}
		var got letter
		if err := json.Unmarshal(v, &got); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		switch c.as {
		case "row":
			if got.Row != c.row || got.RowJSON != nil || got.RowBytes != 0 {
				t.Errorf("%s: row of %d bytes, row_json %d, row_bytes %d; want the row whole as a string", c.name, len(got.Row), len(got.RowJSON), got.RowBytes)
			}
		case "row_json":
			if string(got.RowJSON) != c.row || got.Row != "" || got.RowBytes != 0 {
				t.Errorf("%s: row_json of %d bytes, row %d, row_bytes %d; want the row whole as JSON", c.name, len(got.RowJSON), len(got.Row), got.RowBytes)
			}
		case "cut":
			if got.RowBytes != len(c.row) || !strings.HasPrefix(c.row, got.Row) || len(got.Row) < maxLetterBytes/4 || !utf8.ValidString(got.Row) {
				t.Errorf("%s: row_bytes %d (want %d), a row of %d bytes, its start: %v", c.name, got.RowBytes, len(c.row), len(got.Row), strings.HasPrefix(c.row, got.Row))
			}
		}
	}
}

func TestSplitWrites_bounds(t *testing.T) {
	if got := splitWrites(nil, nil); len(got) != 0 {
		t.Fatalf("nothing: got %d writes, want 0", len(got))
	}
	big := kv.KeyValue{Key: "/q/x/dlq/1", Value: make([]byte, letterWriteBytes+1)}
	small := kv.KeyValue{Key: "/q/x/dlq/2", Value: make([]byte, 100)}
	got := splitWrites([]kv.KeyValue{small, big, small}, []string{"/q/x/dlq/0"})
	if len(got) != 3 || len(got[0].deletes) != 1 || len(got[0].puts) != 1 || len(got[1].puts) != 1 || len(got[2].puts) != 1 {
		t.Fatalf("a letter over the byte bound: got %+v, want [delete+small] [big] [small]", got)
	}
	many := make([]string, letterWriteOps+1)
	for i := range many {
		many[i] = fmt.Sprint(i)
	}
	if got := splitWrites(nil, many); len(got) != 2 || len(got[0].deletes) != letterWriteOps {
		t.Fatalf("%d deletes: got %d writes, want 2 with %d in the first", len(many), len(got), letterWriteOps)
	}
}

func TestParseSettings_deadLetters(t *testing.T) {
	def := Config{}.withDefaults().defaults()
	if def.DeadLetterMaxRows != 10_000 || def.DeadLetterTTL != 168*time.Hour {
		t.Fatalf("defaults: got %d rows, %v; want 10000, 168h", def.DeadLetterMaxRows, def.DeadLetterTTL)
	}
	good := []struct {
		raw  string
		rows int
		ttl  time.Duration
	}{
		{`{"dlq_max_rows":1000,"dlq_ttl":"24h"}`, 1000, 24 * time.Hour},
		{`{"dlq_ttl":"0s"}`, 10_000, 0},
		{`{"dlq_max_rows":0}`, 0, 168 * time.Hour},
	}
	for _, tt := range good {
		s, err := parseSettings("ch:events", []byte(tt.raw), def)
		if err != nil || s.DeadLetterMaxRows != tt.rows || s.DeadLetterTTL != tt.ttl {
			t.Errorf("parseSettings(%s): got %d rows, %v, %v; want %d, %v", tt.raw, s.DeadLetterMaxRows, s.DeadLetterTTL, err, tt.rows, tt.ttl)
		}
	}
	bad := []struct{ raw, want string }{
		{`{"dlq_max_rows":-1}`, "dlq_max_rows -1: want 0 to 1000000"},
		{`{"dlq_max_rows":1000001}`, "dlq_max_rows"},
		{`{"dlq_ttl":"7d"}`, "dlq_ttl \"7d\": want a duration"},
		{`{"dlq_ttl":"30s"}`, "dlq_ttl 30s: want 0 (forever) or 1m0s to"},
		{`{"dlq_ttl":"-1h"}`, "dlq_ttl"},
		{`{"dlq_ttl":168}`, "dlq_ttl"},
	}
	for _, tt := range bad {
		if _, err := parseSettings("ch:events", []byte(tt.raw), def); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseSettings(%s): got %v, want an error about %q", tt.raw, err, tt.want)
		}
	}
	if err := (Config{MemberID: 1, DeadLetterMaxRows: maxDeadLetterRows + 1}).Validate(); err == nil || !strings.Contains(err.Error(), "DeadLetterMaxRows") {
		t.Errorf("Validate with DeadLetterMaxRows over the bound: got %v", err)
	}
	if err := (Config{MemberID: 1, DeadLetterTTL: -time.Hour}).Validate(); err == nil || !strings.Contains(err.Error(), "DeadLetterTTL") {
		t.Errorf("Validate with a negative DeadLetterTTL: got %v", err)
	}
}

// logLines is a slog handler that keeps the messages logged at WARN and
// above.
type logLines struct {
	mu    sync.Mutex
	warns []string
}

func (l *logLines) handler() slog.Handler {
	return slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.warns = append(l.warns, string(p))
		return len(p), nil
	}), &slog.HandlerOptions{Level: slog.LevelWarn})
}

// count returns the lines kept that hold s.
func (l *logLines) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, w := range l.warns {
		if strings.Contains(w, s) {
			n++
		}
	}
	return n
}

// last returns the last line kept that holds s.
func (l *logLines) last(s string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.warns) - 1; i >= 0; i-- {
		if strings.Contains(l.warns[i], s) {
			return l.warns[i]
		}
	}
	return ""
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// metricsText returns what /metrics shows of providers.
func metricsText(t *testing.T, p *chuteotel.Providers) string {
	t.Helper()
	rec := httptest.NewRecorder()
	p.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

const droppedWarning = "dead letters dropped"

// TestDrainer_dropLetters_warnsOncePerMinute checks that dropped letters
// are counted at once, by reason, and logged at WARN at most once a
// minute per queue, with the count since the last WARN, on the clock.
func TestDrainer_dropLetters_warnsOncePerMinute(t *testing.T) {
	clk := clockwork.NewFakeClock()
	logs := &logLines{}
	providers, err := chuteotel.New(chuteotel.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{MemberID: 1, Clock: clk, Logger: slog.New(logs.handler()), Meter: providers.MeterProvider()})
	if err != nil {
		t.Fatal(err)
	}
	d := &drainer{m: m, q: newQueue("ch:events", m.cfg.defaults())}
	d.dropLetters(dropMaxRows, 5)
	d.dropLetters(dropMaxRows, 7)
	clk.Advance(30 * time.Second)
	d.dropLetters(dropTTL, 2)
	if got := logs.count(droppedWarning); got != 1 {
		t.Fatalf("WARNs within the first minute: got %d, want 1", got)
	}
	if l := logs.last(droppedWarning); !strings.Contains(l, "max_rows=5 ttl=0") {
		t.Fatalf("first WARN: got %q, want max_rows=5 ttl=0", l)
	}
	clk.Advance(30 * time.Second)
	d.dropLetters("", 0) // the sweep's call: a WARN that waited for its minute
	if got := logs.count(droppedWarning); got != 2 {
		t.Fatalf("WARNs after a minute: got %d, want 2", got)
	}
	if l := logs.last(droppedWarning); !strings.Contains(l, "max_rows=7 ttl=2") {
		t.Fatalf("second WARN: got %q, want the counts since the first: max_rows=7 ttl=2", l)
	}
	clk.Advance(time.Hour)
	d.dropLetters("", 0)
	if got := logs.count(droppedWarning); got != 2 {
		t.Fatalf("WARNs with nothing dropped: got %d, want 2", got)
	}
	body := metricsText(t, providers)
	for _, want := range []string{
		`chute_dead_letters_dropped_total{queue="ch:events",reason="max_rows"} 12`,
		`chute_dead_letters_dropped_total{queue="ch:events",reason="ttl"} 2`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestSweepDeadLetters_wakesDueDrainersOnly checks that the reconcile
// loop's wake reaches a drainer only once its letters are due (their
// sweep, or a WARN of dropped letters waiting for its minute), and at
// most every sweepWake.
func TestSweepDeadLetters_wakesDueDrainersOnly(t *testing.T) {
	clk := clockwork.NewFakeClock()
	m, err := New(Config{MemberID: 1, Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	newDrainer := func(name string) *drainer {
		d := &drainer{m: m, q: newQueue(name, m.cfg.defaults()), sweep: make(chan struct{}, 1)}
		m.drainers[name] = d
		return d
	}
	woken := func(d *drainer) bool {
		select {
		case <-d.sweep:
			return true
		default:
			return false
		}
	}
	fresh, swept, dropping := newDrainer("ch:fresh"), newDrainer("ch:swept"), newDrainer("ch:dropping")
	swept.letters.next = clk.Now().Add(10 * sweepEvery)
	swept.noteSweepDue()
	dropping.letters.next = clk.Now().Add(sweepEvery)
	dropping.dropLetters(dropMaxRows, 1) // warned at once
	dropping.dropLetters(dropMaxRows, 1) // its WARN waits a minute
	if due := time.Unix(0, dropping.sweepDue.Load()); !due.Equal(clk.Now().Add(dropWarnEvery)) {
		t.Fatalf("due with a WARN waiting: %v, want %v", due, clk.Now().Add(dropWarnEvery))
	}
	dropping.letters.next = clk.Now().Add(2 * dropWarnEvery)
	dropping.noteSweepDue()

	clk.Advance(sweepWake)
	m.sweepDeadLetters()
	if !woken(fresh) || woken(swept) || woken(dropping) {
		t.Fatal("first wake: want only the drainer that never swept woken")
	}
	m.sweepDeadLetters()
	if woken(fresh) {
		t.Fatal("woken twice within sweepWake")
	}
	clk.Advance(dropWarnEvery)
	m.sweepDeadLetters()
	if !woken(fresh) || woken(swept) || !woken(dropping) {
		t.Fatal("a minute on: want the never-swept drainer and the one whose WARN is due woken, not the swept one")
	}
	clk.Advance(10 * sweepEvery)
	m.sweepDeadLetters()
	if !woken(swept) {
		t.Fatal("the swept drainer not woken once its next sweep is due")
	}
}

// TestDrainer_sweepLetters_ttl checks, on a fake clock, that letters
// older than dlq_ttl are deleted by the dispatcher's sweep, once a minute,
// and the others kept: a letter without a time (a user's) never expires,
// and dlq_ttl "0s" keeps letters forever.
func TestDrainer_sweepLetters_ttl(t *testing.T) {
	clk := clockwork.NewFakeClock()
	providers, err := chuteotel.New(chuteotel.Config{})
	if err != nil {
		t.Fatal(err)
	}
	n := startSinkNode(t, &chURL{}, func(c *Config) { c.Clock = clk; c.Meter = providers.MeterProvider() })
	cli := n.client(t)
	ctx := testCtx(t, 30*time.Second)
	if _, err := cli.Put(ctx, SettingsKey("ch:ttl"), `{"dlq_ttl":"1h"}`); err != nil {
		t.Fatal(err)
	}
	t0 := clk.Now()
	seed := map[uint64]time.Time{5: t0.Add(-2 * time.Hour), 9: t0.Add(-30 * time.Minute), 10: t0}
	for seq, at := range seed {
		v, _ := json.Marshal(letter{Time: at.UTC(), Table: "`default`.`ttl`", Row: "{}"})
		if _, err := cli.Put(ctx, DeadLetterKey("ch:ttl", seq), string(v)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Put(ctx, DeadLetterKey("ch:ttl", 11), `{"note":"a user's letter, no time"}`); err != nil {
		t.Fatal(err)
	}
	// A row starts the queue's drainer; with no clickhouse_url it stays queued.
	if _, err := cli.Put(ctx, "/q/ch:ttl/p/1", `{"id":1}`); err != nil {
		t.Fatal(err)
	}
	letters := func() []string {
		resp, err := cli.Get(ctx, letterPrefix("ch:ttl"), clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, kv := range resp.Kvs {
			keys = append(keys, strings.TrimPrefix(string(kv.Key), letterPrefix("ch:ttl")))
		}
		slices.Sort(keys)
		return keys
	}
	advanceUntil := func(step time.Duration, what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; letters %v", what, letters())
			}
			clk.Advance(step)
			time.Sleep(5 * time.Millisecond)
		}
	}
	advanceUntil(100*time.Millisecond, "letter 5 (2h old) to expire", func() bool { return !slices.Contains(letters(), "5") })
	if got, want := letters(), []string{"10", "11", "9"}; !slices.Equal(got, want) {
		t.Fatalf("after the first sweep: got letters %v, want %v", got, want)
	}
	// Letter 9 turns 1h old 30 minutes on; the next sweep is due a
	// minute after the first.
	clk.Advance(29 * time.Minute)
	time.Sleep(50 * time.Millisecond)
	if got := letters(); !slices.Contains(got, "9") {
		t.Fatalf("letter 9 gone before it was 1h old: letters %v", got)
	}
	advanceUntil(10*time.Second, "letter 9 to expire", func() bool { return !slices.Contains(letters(), "9") })
	if elapsed := clk.Since(t0); elapsed < 30*time.Minute || elapsed > 32*time.Minute {
		t.Errorf("letter 9 deleted %v after it was written 30m before t0: want 30m to 32m (1h ttl, a sweep a minute)", elapsed)
	}
	if _, err := cli.Put(ctx, SettingsKey("ch:ttl"), `{"dlq_ttl":"0s"}`); err != nil {
		t.Fatal(err)
	}
	clk.Advance(24 * time.Hour)
	advanceUntil(time.Minute, "a few sweeps", func() bool { return clk.Since(t0) > 24*time.Hour+5*time.Minute })
	if got, want := letters(), []string{"10", "11"}; !slices.Equal(got, want) {
		t.Fatalf("with dlq_ttl 0s: got letters %v, want %v kept", got, want)
	}
	if body := metricsText(t, providers); !strings.Contains(body, `chute_dead_letters_dropped_total{queue="ch:ttl",reason="ttl"} 2`) {
		t.Errorf("/metrics lacks 2 letters dropped for ttl")
	}
}

// leaderlessLetters is a node's KV whose first write of dead letters
// fails as during a raft election (kv.ErrNoLeader); the next commits.
type leaderlessLetters struct {
	*kv.Server
	failed atomic.Int32
}

func (s *leaderlessLetters) Apply(ctx context.Context, puts []kv.KeyValue, deletes []string) error {
	if len(puts) > 0 && strings.Contains(puts[0].Key, "/dlq/") && s.failed.Add(1) == 1 {
		return kv.ErrNoLeader
	}
	return s.Server.Apply(ctx, puts, deletes)
}

// TestDeadLetters_writeFailsForAMoment checks that a refused row whose
// dead letter could not be written for a moment (no leader) stays queued
// and is stored at the next try, and that an ack=inserted put is answered
// with a letter that exists. The row used to be dropped, and the put told
// it was stored.
func TestDeadLetters_writeFailsForAMoment(t *testing.T) {
	fake := &pickyClickHouse{up: true}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	var records *leaderlessLetters
	n := startSinkNodeOn(t, &chURL{url: srv.URL, db: "default"}, func(s *kv.Server) RecordStore {
		records = &leaderlessLetters{Server: s}
		return records
	})
	mgr := n.mgr
	cli := n.client(t)
	ctx := testCtx(t, 30*time.Second)
	if _, err := cli.Put(ctx, SettingsKey("ch:events"), `{"ack":"inserted"}`); err != nil {
		t.Fatal(err)
	}
	_, perr := cli.Put(ctx, "/q/ch:events/p/k", `{"id":2,"s":"bad"}`)
	if records.failed.Load() < 2 {
		t.Fatalf("dead letter writes: %d, want the failed one and another", records.failed.Load())
	}
	if perr == nil || !strings.Contains(perr.Error(), "/q/ch:events/dlq/") {
		t.Fatalf("the put of a refused row: %v, want its dead letter named", perr)
	}
	letters, err := cli.Get(ctx, "/q/ch:events/dlq/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(letters.Kvs) != 1 || !strings.Contains(perr.Error(), string(letters.Kvs[0].Key)) {
		t.Fatalf("the put was told %v; dead letters stored: %d", perr, len(letters.Kvs))
	}
	if n := mgr.dropped.Load(); n != 0 {
		t.Fatalf("%d acknowledged rows dropped", n)
	}
}
