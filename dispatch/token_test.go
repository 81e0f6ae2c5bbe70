package dispatch

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSink_dedupTokenWhenServerKnowsIt uses a fake ClickHouse, because
// 18.16 has no insert_deduplication_token: the fake says it has the
// setting, and every insert must carry a token naming the queue, a
// digest of its rows' ids and their count. (That a real
// 18.16 never gets the token is checked by the real-server tests, whose
// inserts would fail with code 115.)
var tokenShape = regexp.MustCompile(`^ch:tok:[0-9a-f]{32}:[12]$`)

func TestSink_dedupTokenWhenServerKnowsIt(t *testing.T) {
	var mu sync.Mutex
	var inserts []string
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query().Get("query")
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(q, "system.settings") || strings.Contains(string(body), "system.settings") {
			_, _ = io.WriteString(w, "1\n")
			return
		}
		mu.Lock()
		inserts = append(inserts, r.URL.Query().Get("insert_deduplication_token"))
		mu.Unlock()
	}))
	defer fake.Close()
	n := startSinkNode(t, &chURL{url: fake.URL, db: "default"})
	cli := n.client(t)
	ctx := testCtx(t, 10*time.Second)
	for _, k := range []string{"1", "2"} {
		if _, err := cli.Put(ctx, "/q/ch:tok/p/"+k, `{"id":`+k+`}`); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 5*time.Second, "the queue to empty", func() bool { return n.depth("ch:tok") == 0 })
	mu.Lock()
	defer mu.Unlock()
	if len(inserts) == 0 {
		t.Fatal("no insert reached the fake server")
	}
	for _, tok := range inserts {
		if !tokenShape.MatchString(tok) {
			t.Fatalf("token %q, want ch:tok:<32 hex digits>:<rows>", tok)
		}
	}
}

// TestSink_dedupTokenSameAtEveryAttempt: a batch whose first attempt
// went without a token, because the server could not be asked whether
// it takes one, goes without one at every retry, though the server
// answers the question by then: had the first attempt landed, a retry
// with a token would be a second block, not a duplicate ClickHouse
// drops. Fake ClickHouse: the question failing and then an insert
// refused on demand are what a real server cannot be made to do.
func TestSink_dedupTokenSameAtEveryAttempt(t *testing.T) {
	var mu sync.Mutex
	var asked int
	var inserts []string
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if strings.Contains(r.URL.Query().Get("query"), "system.settings") || strings.Contains(string(body), "system.settings") {
			if asked++; asked == 1 {
				w.WriteHeader(http.StatusServiceUnavailable) // the first question fails
				return
			}
			_, _ = io.WriteString(w, "1\n")
			return
		}
		inserts = append(inserts, r.URL.Query().Get("insert_deduplication_token"))
		if len(inserts) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable) // the first attempt is retried
		}
	}))
	defer fake.Close()
	n := startSinkNode(t, &chURL{url: fake.URL, db: "default"})
	cli := n.client(t)
	ctx := testCtx(t, 10*time.Second)
	if _, err := cli.Put(ctx, "/q/ch:tok/p/1", `{"id":1}`); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the queue to empty", func() bool { return n.depth("ch:tok") == 0 })
	mu.Lock()
	first := slices.Clone(inserts)
	mu.Unlock()
	if len(first) != 2 || first[0] != "" || first[1] != "" {
		t.Fatalf("tokens of the attempts: %q, want two attempts, both without one", first)
	}
	// The next batch asks again, and gets a token.
	if _, err := cli.Put(ctx, "/q/ch:tok/p/2", `{"id":2}`); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the queue to empty", func() bool { return n.depth("ch:tok") == 0 })
	mu.Lock()
	defer mu.Unlock()
	if len(inserts) != 3 || !strings.HasPrefix(inserts[2], "ch:tok:") {
		t.Fatalf("tokens of the attempts: %q, want a third with a token", inserts)
	}
}

// TestRowsToken: the token is the rows' ids in order and their count,
// not who formed the batch or how it numbered them: the same messages
// numbered by another dispatcher give the same token (a batch rebuilt
// after a hand-over is dropped by ClickHouse if the first landed), and
// any other rows, order or part gives another.
func TestRowsToken(t *testing.T) {
	ids := []MsgID{{Origin: 7, N: 1}, {Origin: 7, N: 2}, {Origin: 9, N: 1}}
	rowsOf := func(first uint64, ids ...MsgID) []row {
		rows := make([]row, len(ids))
		for i, id := range ids {
			rows[i] = row{seq: first + uint64(i)*3, m: &message{id: id}}
		}
		return rows
	}
	a := rowsToken("ch:t", rowsOf(1, ids...), nil)
	if b := rowsToken("ch:t", rowsOf(1<<40, ids...), nil); a != b {
		t.Fatalf("same rows, other numbers: %q and %q", a, b)
	}
	if !regexp.MustCompile(`^ch:t:[0-9a-f]{32}:3$`).MatchString(a) {
		t.Fatalf("token %q", a)
	}
	others := map[string][]row{
		"another order":   rowsOf(1, ids[1], ids[0], ids[2]),
		"a row less":      rowsOf(1, ids[:2]...),
		"another id":      rowsOf(1, ids[0], ids[1], MsgID{Origin: 9, N: 2}),
		"origin and n":    rowsOf(1, ids[0], ids[1], MsgID{Origin: 1, N: 9}),
		"another queue":   nil,
		"a part of three": nil,
	}
	for what, rows := range others {
		var tok string
		switch what {
		case "another queue":
			tok = rowsToken("ch:u", rowsOf(1, ids...), nil)
		case "a part of three":
			tok = rowsToken("ch:t", rowsOf(1, ids...), []int{0, 2})
			if want := rowsToken("ch:t", rowsOf(5, ids[0], ids[2]), nil); tok != want {
				t.Fatalf("part [0 2]: %q, the same rows alone: %q", tok, want)
			}
		default:
			tok = rowsToken("ch:t", rows, nil)
		}
		if tok == a {
			t.Fatalf("%s: the same token %q", what, tok)
		}
	}
	// More ids than one buffer of the digest holds.
	many := make([]MsgID, 200)
	for i := range many {
		many[i] = MsgID{Origin: 3, N: uint64(i)}
	}
	long := rowsToken("ch:t", rowsOf(1, many...), nil)
	many[150].N = 1000
	if rowsToken("ch:t", rowsOf(1, many...), nil) == long {
		t.Fatal("a changed id past the first 64 rows left the token as it was")
	}
}
