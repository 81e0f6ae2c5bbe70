package dispatch

import (
	"crypto/tls"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/kv"
	"chute/sink"
)

// chURL lets a test change the ClickHouse settings a node reads at every
// batch.
type chURL struct {
	mu          sync.Mutex
	url, db     string
	tls         *tls.Config
	settings    sink.Settings
	compression sink.Compression
}

func (c *chURL) options() (sink.Settings, sink.Compression) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.settings, c.compression
}

func (c *chURL) tlsConfig() *tls.Config {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tls
}

func (c *chURL) get() (string, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.url, c.db
}

// startSinkNode starts one node draining ClickHouse queues into ch;
// mutate may change its config further.
func startSinkNode(t *testing.T, settings *chURL, mutate ...func(*Config)) *testNode {
	return startSinkNodeOn(t, settings, nil, mutate...)
}

// startSinkNodeOn is startSinkNode with the key space through records
// (startNodeOn).
func startSinkNodeOn(t *testing.T, settings *chURL, records func(*kv.Server) RecordStore, mutate ...func(*Config)) *testNode {
	return startNodeOn(t, func(c *Config) {
		c.ClickHouse = settings.get
		c.ClickHouseTLS = settings.tlsConfig
		c.ClickHouseOptions = settings.options
		c.RetryMin = 50 * time.Millisecond
		c.RetryMax = 500 * time.Millisecond
		c.InsertTimeout = 5 * time.Second
		for _, f := range mutate {
			f(c)
		}
	}, records)
}

// TestSink_refusesBadValues checks put-time validation: values that are not
// one JSON object are InvalidArgument and nothing is queued.
func TestSink_refusesBadValues(t *testing.T) {
	n := startSinkNode(t, &chURL{})
	cli := n.client(t)
	ctx := testCtx(t, 10*time.Second)
	for _, v := range []string{"", "not json", `[{"id":1}]`, `{"id":1}{"id":2}`, `42`} {
		_, err := cli.Put(ctx, "/q/ch:events/p/x", v)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "/q/ch:events/p/x") {
			t.Errorf("value %q: got %v, want InvalidArgument naming the key", v, err)
		}
	}
	if d := n.depth("ch:events"); d > 0 {
		t.Fatalf("depth: got %d, want nothing queued", d)
	}
	// No clickhouse_url: a good row stays queued.
	if _, err := cli.Put(ctx, "/q/ch:events/p/x", `{"id":1}`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if d := n.depth("ch:events"); d != 1 {
		t.Fatalf("depth without a URL: got %d, want 1", d)
	}
}
