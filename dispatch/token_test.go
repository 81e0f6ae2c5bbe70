package dispatch

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSink_dedupTokenWhenServerKnowsIt uses a fake ClickHouse, because
// 18.16 has no insert_deduplication_token: the fake says it has the
// setting, and every insert must carry a token naming the queue, the
// epoch, the member and the batch's first and last numbers. (That a real
// 18.16 never gets the token is checked by the real-server tests, whose
// inserts would fail with code 115.)
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
		if want := "ch:tok:1:0000000000000007:"; !strings.HasPrefix(tok, want) || strings.Count(tok, ":") != 5 {
			t.Fatalf("token %q, want %s<first>:<last>", tok, want)
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
