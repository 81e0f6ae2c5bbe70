package bench

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"chute/dispatch"
	"chute/internal/nodestatus"
)

// fakeNode is the KV of a fake chute node: puts to /q/ch:<table>/p/<key>
// are rows of table's queue, which the node dispatches from its first put
// on; with a ClickHouse URL a flusher inserts them every 10 ms, keeping
// those it cannot send, without one the node keeps a copy of every value
// (so its heap grows as a real node's does). A get of a dispatcher record /q/<name> answers
// "fake;epoch=1" on every fake node, as if one member dispatched every
// queue. Other keys are accepted and forgotten. Its queue log counters
// count a record per row and, unless noFsync, an fsync per call. Its
// inserts' bodies are compressed as compression says, with the
// Content-Encoding ClickHouse reads.
type fakeNode struct {
	pb.UnimplementedKVServer
	name, memberID string
	clickhouse     string
	noFsync        bool   // set before it serves
	compression    string // none, gzip or deflate; set before it serves

	mu      sync.Mutex        // guards pending, held, depth, order, records, fsyncs
	pending map[string][]byte // table -> JSONEachRow not yet inserted
	held    [][]byte          // rows kept without a ClickHouse to take them
	depth   map[string]int64  // queue -> rows taken
	order   []string          // queues in the order of their first put
	records int64             // rows taken
	fsyncs  int64             // calls that took rows, unless noFsync
}

var _ pb.KVServer = (*fakeNode)(nil)

func newFakeNode(name, clickhouse string) *fakeNode {
	h := fnv.New64a()
	h.Write([]byte(name))
	return &fakeNode{
		name: name, memberID: fmt.Sprintf("%x", h.Sum64()), clickhouse: clickhouse,
		pending: make(map[string][]byte), depth: make(map[string]int64),
	}
}

// put takes a row when key is a ch: queue's, and reports whether it did.
func (n *fakeNode) put(key, value []byte) bool {
	rest, ok := strings.CutPrefix(string(key), "/q/ch:")
	if !ok {
		return false
	}
	table, _, ok := strings.Cut(rest, "/p/")
	if !ok {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.records++
	q := "ch:" + table
	if _, seen := n.depth[q]; !seen {
		n.order = append(n.order, q)
	}
	n.depth[q]++
	if n.clickhouse == "" {
		n.held = append(n.held, bytes.Clone(value))
		return true
	}
	b := append(n.pending[table], value...)
	n.pending[table] = append(b, '\n')
	return true
}

// fsync counts the fsync of a call that took rows, unless noFsync.
func (n *fakeNode) fsync(took bool) {
	if !took || n.noFsync {
		return
	}
	n.mu.Lock()
	n.fsyncs++
	n.mu.Unlock()
}

func (n *fakeNode) Put(_ context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	n.fsync(n.put(r.Key, r.Value))
	return &pb.PutResponse{Header: noopHeader()}, nil
}

func (n *fakeNode) Txn(_ context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	took := false
	for _, op := range r.Success {
		if p := op.GetRequestPut(); p != nil {
			took = n.put(p.Key, p.Value) || took
		}
	}
	n.fsync(took)
	return &pb.TxnResponse{Header: noopHeader(), Succeeded: true}, nil
}

// counter reads one of n's counters under its lock.
func (n *fakeNode) counter(c *int64) func() float64 {
	return func() float64 {
		n.mu.Lock()
		defer n.mu.Unlock()
		return float64(*c)
	}
}

func (n *fakeNode) Range(_ context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	resp := &pb.RangeResponse{Header: noopHeader()}
	if k := string(r.Key); strings.HasPrefix(k, "/q/") && strings.Count(k, "/") == 2 {
		resp.Kvs = []*mvccpb.KeyValue{{Key: r.Key, Value: []byte("fake;epoch=1"), CreateRevision: 1, ModRevision: 1, Version: 1}}
		resp.Count = 1
	}
	return resp, nil
}

// flushLoop inserts the pending rows every 10 ms until ctx ends.
func (n *fakeNode) flushLoop(ctx context.Context) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		n.mu.Lock()
		batches := n.pending
		n.pending = make(map[string][]byte)
		n.mu.Unlock()
		for table, body := range batches {
			u := n.clickhouse + "/?query=" + url.QueryEscape("INSERT INTO default."+table+" FORMAT JSONEachRow")
			req, err := n.insertRequest(ctx, u, body)
			if err != nil {
				continue // ditto
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				// Unreachable: the node keeps the rows, as a real one
				// does while it retries.
				n.mu.Lock()
				n.held = append(n.held, body)
				n.mu.Unlock()
				continue
			}
			_ = resp.Body.Close()
		}
	}
}

// insertRequest is the POST of body to u, compressed as n.compression
// says.
func (n *fakeNode) insertRequest(ctx context.Context, u string, body []byte) (*http.Request, error) {
	var enc bytes.Buffer
	var w io.WriteCloser
	switch n.compression {
	case "gzip":
		w = gzip.NewWriter(&enc)
	case "deflate":
		w = zlib.NewWriter(&enc)
	default:
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
		return req, err
	}
	if _, err := w.Write(body); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, &enc)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Encoding", n.compression)
	return req, nil
}

// serveMetrics serves /status (three members alive, the queues this node
// took puts for, dispatched by itself), /readyz (always ready) and
// /metrics (Go runtime metrics and the queue log counters) on l until ctx
// ends.
func (n *fakeNode) serveMetrics(ctx context.Context, l net.Listener) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: metricQueueLogFsyncs, Help: "fsyncs"}, n.counter(&n.fsyncs)),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: metricQueueLogAppended, Help: "records"}, n.counter(&n.records)))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		n.mu.Lock()
		st := nodestatus.Node{Name: n.name, Member: n.memberID}
		for i := range 3 {
			st.Members = append(st.Members, nodestatus.Member{Name: fmt.Sprint(i), Status: "alive"})
		}
		for _, q := range n.order {
			st.Queues = append(st.Queues, dispatch.QueueStatus{Name: q, Dispatcher: n.memberID, Rows: int(n.depth[q])})
		}
		n.mu.Unlock()
		_ = json.NewEncoder(w).Encode(st)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	_ = srv.Serve(l)
}
