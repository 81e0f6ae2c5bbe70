package dispatch

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/sink"
)

// TestManager_Produce_refusedAtPut puts, with clientv3, to queue names
// and values no ClickHouse queue takes: each put is InvalidArgument with
// a message naming the rule, and nothing is queued.
func TestManager_Produce_refusedAtPut(t *testing.T) {
	n := startSinkNode(t, &chURL{})
	cli := n.client(t)
	ctx := testCtx(t, 10*time.Second)
	tests := []struct {
		key, value string
		queue      string // whose depth must stay 0
		want       []string
	}{
		{"/q/ch:system.query_log/p/1", `{"id":1}`, "ch:system.query_log",
			[]string{"etcdserver: ch:system.query_log: table system.query_log is not in --clickhouse-allow-tables (*.* except system.*, INFORMATION_SCHEMA.*, information_schema.*)"}},
		{"/q/clickhouse:information_schema.tables/p/1", `{"id":1}`, "clickhouse:information_schema.tables",
			[]string{"table information_schema.tables is not in --clickhouse-allow-tables"}},
		{"/q/ch:default./p/1", `{"id":1}`, "ch:default.", []string{"etcdserver: ch:default.: ", "empty table after the dot", "ch:{db}.{table}"}},
		{"/q/ch:.events/p/1", `{"id":1}`, "ch:.events", []string{"etcdserver: ch:.events: ", "empty database before the dot"}},
		{"/q/ch:a.b.c/p/1", `{"id":1}`, "ch:a.b.c", []string{"more than one dot"}},
		{"/q/ch: events/p/1", `{"id":1}`, "ch: events", []string{"space or control character at byte 0"}},
		{"/q//p/x", `{"id":1}`, "", []string{"etcdserver: the queue name is empty: a producer key is /q/{name}/p/{key}"}},
		{"/queue//producer/x", `job`, "", []string{"the queue name is empty"}},
		{"/q/ch:events/p/1", "{\"s\":\"caf\xe9\"}", "ch:events", []string{"etcdserver: /q/ch:events/p/1: ", "invalid UTF-8 at byte 9"}},
		{"/q/ch:events/p/1", "{\"s\":\"ok\",\"t\":\"\xed\xa0\x80\"}", "ch:events", []string{"invalid UTF-8 at byte 15"}},
	}
	for _, tt := range tests {
		_, err := cli.Put(ctx, tt.key, tt.value)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("put %s %q: got %v, want InvalidArgument", tt.key, tt.value, err)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(status.Convert(err).Message(), w) {
				t.Errorf("put %s %q: got %q, want it to say %q", tt.key, tt.value, status.Convert(err).Message(), w)
			}
		}
		if tt.queue != "" && n.depth(tt.queue) > 0 {
			t.Errorf("put %s: depth %d, want nothing queued", tt.key, n.depth(tt.queue))
		}
	}
	// A txn of puts is refused whole: its good put is not queued either.
	_, err := cli.Txn(ctx).Then(
		clientv3.OpPut("/q/ch:events/p/good", `{"id":1}`),
		clientv3.OpPut("/q/ch:system.query_log/p/bad", `{"id":2}`),
	).Commit()
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "system.query_log is not in --clickhouse-allow-tables") {
		t.Errorf("txn: got %v, want InvalidArgument naming the table", err)
	}
	if d := n.depth("ch:events"); d > 0 {
		t.Errorf("txn: depth of ch:events %d, want 0", d)
	}
	// Puts after the first to the same queue are checked as well: a bad
	// row refuses the txn.
	for _, bad := range []struct{ key, value, want string }{
		{"/q/ch:events/p/3", `{"id":3`, "etcdserver: /q/ch:events/p/3: "},
		{"/q/ch:events/p/3", "{\"s\":\"caf\xe9\"}", "etcdserver: /q/ch:events/p/3: sink: invalid UTF-8 at byte 9"},
	} {
		_, err := cli.Txn(ctx).Then(
			clientv3.OpPut("/q/ch:events/p/1", `{"id":1}`),
			clientv3.OpPut("/q/ch:events/p/2", `{"id":2}`),
			clientv3.OpPut(bad.key, bad.value),
		).Commit()
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("txn ending with %s %q: got %v, want InvalidArgument saying %q", bad.key, bad.value, err, bad.want)
		}
		if d := n.depth("ch:events"); d > 0 {
			t.Errorf("txn ending with %s: depth of ch:events %d, want 0", bad.key, d)
		}
	}
	// What passes: a named database, an ordinary queue named ch: alone.
	for _, key := range []string{"/q/ch:analytics.events/p/1", "/q/ch:events/p/1", "/q/ch:/p/1"} {
		if _, err := cli.Put(ctx, key, `{"id":1}`); err != nil {
			t.Errorf("put %s: got %v, want nil", key, err)
		}
	}
}

// tablesSetting is what cmd/chute hands Config.ClickHouseTables: a
// list and a database that a reload replaces.
type tablesSetting struct {
	v atomic.Pointer[tablesValue]
}

type tablesValue struct {
	allow *sink.AllowList
	db    string
}

func (s *tablesSetting) get() (*sink.AllowList, string) {
	v := s.v.Load()
	return v.allow, v.db
}

func (s *tablesSetting) set(t *testing.T, db string, patterns ...string) {
	t.Helper()
	a, err := sink.NewAllowList(patterns)
	if err != nil {
		t.Fatal(err)
	}
	s.v.Store(&tablesValue{allow: a, db: db})
}

// TestManager_Produce_allowTablesReload checks that a new list or
// database applies to the next put, although the answers for a queue
// name are remembered.
func TestManager_Produce_allowTablesReload(t *testing.T) {
	tables := &tablesSetting{}
	tables.set(t, "default")
	n := startSinkNode(t, &chURL{}, func(c *Config) { c.ClickHouseTables = tables.get })
	cli := n.client(t)
	ctx := testCtx(t, 10*time.Second)
	put := func(queue string) error {
		_, err := cli.Put(ctx, "/q/"+queue+"/p/1", `{"id":1}`)
		return err
	}
	steps := []struct {
		db       string
		patterns []string
		queue    string
		ok       bool
	}{
		{"default", nil, "ch:system.query_log", false},
		{"default", nil, "ch:analytics.events", true},
		{"default", []string{"default.*"}, "ch:analytics.events", false},
		{"default", []string{"default.*"}, "ch:events", true},
		{"default", []string{"*.*", "system.query_log"}, "ch:system.query_log", true},
		{"default", []string{"*.*", "system.query_log"}, "ch:system.tables", false},
		{"analytics", []string{"analytics.*"}, "ch:events", true},
		{"default", []string{"analytics.*"}, "ch:events", false},
	}
	for _, s := range steps {
		tables.set(t, s.db, s.patterns...)
		for range 2 { // the second answer comes from the gate's memory
			err := put(s.queue)
			if s.ok && err != nil || !s.ok && status.Code(err) != codes.InvalidArgument {
				t.Errorf("db %s, list %q, put to %s: got %v, want ok=%v", s.db, s.patterns, s.queue, err, s.ok)
			}
		}
	}
}

func TestTableGate_check_bounded(t *testing.T) {
	var g tableGate
	for i := range 3 * gateNames {
		name := fmt.Sprintf("ch:t%d", i)
		if err := g.check(name, name[3:], nil, "default"); err != nil {
			t.Fatalf("check %s: %v", name, err)
		}
		if len(g.known) > gateNames {
			t.Fatalf("after %d names the gate holds %d, want at most %d", i+1, len(g.known), gateNames)
		}
	}
	if err := g.check("ch:system.x", "system.x", nil, "default"); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("system.x: got %v, want InvalidArgument", err)
	}
}

// TestInsertMetrics_tables_default records inserts into 2,000 tables
// through the OTel SDK at the default bound: the rows counter has 1,000
// table values plus "_other", and no row is lost.
func TestInsertMetrics_tables_default(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	cfg := Config{MemberID: 1}.withDefaults()
	im, err := newInsertMetrics(mp, cfg.MetricsMaxTables)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 2000 {
		label := im.tables.label("default", fmt.Sprintf("t%d", i))
		im.inserted(ctx, label, 1, 10)
		im.deadLettered(ctx, label, 1)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"chute.clickhouse.rows.inserted", "chute.clickhouse.dead_letters", "chute.clickhouse.inserted.bytes"} {
		values, sum := tableValues(t, rm, name)
		if len(values) != 1001 || !values["_other"] || !values["default.t0"] || values["default.t1000"] {
			t.Errorf("%s: got %d table values (_other %v, default.t0 %v, default.t1000 %v), want 1001: the first 1000 and _other",
				name, len(values), values["_other"], values["default.t0"], values["default.t1000"])
		}
		want := int64(2000)
		if name == "chute.clickhouse.inserted.bytes" {
			want = 20000
		}
		if sum != want {
			t.Errorf("%s: got a sum of %d, want %d", name, sum, want)
		}
	}
}

// tableValues returns the table label values of the Int64 sum called
// name, and its total.
func tableValues(t *testing.T, rm metricdata.ResourceMetrics, name string) (map[string]bool, int64) {
	t.Helper()
	values := make(map[string]bool)
	var sum int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			data, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				t.Fatalf("%s: got %T, want an int64 sum", name, m.Data)
			}
			for _, dp := range data.DataPoints {
				v, _ := dp.Attributes.Value(attribute.Key("table"))
				values[v.AsString()] = true
				sum += dp.Value
			}
		}
	}
	return values, sum
}

// BenchmarkManager_checkQueueName measures the check of a ClickHouse
// queue's name on every put, once the gate knows the name.
func BenchmarkManager_checkQueueName(b *testing.B) {
	m, err := New(Config{MemberID: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = m.Shutdown(context.Background()) }()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.checkQueueName("ch:analytics.events"); err != nil {
			b.Fatal(err)
		}
	}
}
