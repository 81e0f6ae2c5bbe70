package dispatch

import (
	"io"
	"net/http"
	"net/http/httptest"
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
