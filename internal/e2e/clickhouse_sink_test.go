//go:build e2e

package e2e

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/internal/chtest"
	"chute/internal/testutil"
)

// TestClickHouse_etcdctlPuts puts 200 rows with etcdctl, one process per
// put from four shell loops, to /q/ch:events/p/<n> on one node: they
// become 200 rows of default.events, byte for byte, and the queue empties.
func TestClickHouse_etcdctlPuts(t *testing.T) {
	t.Parallel()
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default.events (id UInt64, s String) ENGINE = MergeTree ORDER BY id")
	p := StartChute(t, chFlags(ch)...)
	ctlPutLoops(t, p, "ch:events", `{"id":%d,"s":"row %d"}`, 0, 200, 4)
	waitQuery(t, ch, rowsTimeout,
		"SELECT count(), uniqExact(id), min(id), max(id), countIf(s = concat('row ', toString(id))) FROM default.events",
		"200\t200\t0\t199\t200")
	waitDrained(t, "ch:events", p)
}

// TestClickHouse_badRowDeadLetter puts 1,000 rows, one of them with a
// string where the table has a number: 999 rows land, the bad one is the
// queue's only dead letter, with ClickHouse's code and message and the row
// as put, and later puts keep flowing.
func TestClickHouse_badRowDeadLetter(t *testing.T) {
	t.Parallel()
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default.x (id UInt64, n UInt32) ENGINE = MergeTree ORDER BY id")
	p := StartChute(t, chFlags(ch)...)
	cli := clusterClient(t, p.ClientAddr)
	const bad = 500
	badRow := `{"id":500,"n":"five hundred"}`
	ops := make([]clientv3.Op, 0, 1000)
	for i := range 1000 {
		v := fmt.Sprintf(`{"id":%d,"n":%d}`, i, i)
		if i == bad {
			v = badRow
		}
		ops = append(ops, clientv3.OpPut(fmt.Sprintf("/q/ch:x/p/%d", i), v))
	}
	putOps(t, cli, ops, 100)
	waitQuery(t, ch, rowsTimeout, "SELECT count(), uniqExact(id), countIf(id = 500), sum(n) FROM default.x",
		fmt.Sprintf("999\t999\t0\t%d", 999*1000/2-bad))

	var letters map[string]deadLetter
	var raw string
	testutil.Eventually(t, chLogTimeout, "one dead letter under /q/ch:x/dlq/", func() error {
		letters, raw = ctlDeadLetters(t, p, "ch:x")
		if len(letters) != 1 {
			return fmt.Errorf("got %d: %q", len(letters), raw)
		}
		return nil
	})
	for key, l := range letters {
		if !regexp.MustCompile(`^/q/ch:x/dlq/[1-9][0-9]*$`).MatchString(key) {
			t.Errorf("dead letter key %q: want /q/ch:x/dlq/<seq>", key)
		}
		if l.Table != "`default`.`x`" || l.Key != "500" || l.Row != badRow || l.Code != 27 ||
			!strings.Contains(l.Error, "Code: 27") || !strings.Contains(l.Error, "Cannot parse input") {
			t.Errorf("dead letter %s: got %+v; want table `default`.`x`, key 500, row %s, code 27 and ClickHouse's message", key, l, badRow)
		}
	}
	waitLogLine(t, p, "rows refused by ClickHouse", "queue=ch:x", "code=27")

	ctlPutLoops(t, p, "ch:x", `{"id":%d,"n":%d}`, 1000, 1010, 2)
	waitQuery(t, ch, rowsTimeout, "SELECT count(), uniqExact(id), countIf(id = 500) FROM default.x", "1009\t1009\t0")
	waitDrained(t, "ch:x", p)
	if letters, raw = ctlDeadLetters(t, p, "ch:x"); len(letters) != 1 {
		t.Errorf("dead letters after the later puts: got %q, want the one", raw)
	}
}

// TestClickHouse_otherDatabase runs a node with --clickhouse-db default:
// ch:analytics.events (and clickhouse:analytics.events) insert into
// analytics.events; a table whose name holds a backquote (the literal
// byte in the key, put with etcdctl) or a backslash is quoted and found;
// names that read like SQL, `x`; DROP TABLE default.events; --` and
// `x`; DROP TABLE events; --`, are quoted identifiers (the first names the
// database "x`; DROP TABLE default", the part before its first dot), and
// nothing is dropped. ch: alone is an ordinary queue.
func TestClickHouse_otherDatabase(t *testing.T) {
	t.Parallel()
	ch := chtest.Start(t)
	for _, sql := range []string{
		"CREATE DATABASE analytics",
		"CREATE TABLE analytics.events (id UInt64, s String) ENGINE = MergeTree ORDER BY id",
		"CREATE TABLE default.events (id UInt64, s String) ENGINE = MergeTree ORDER BY id",
		"CREATE TABLE default.`we``ird` (id UInt64, s String) ENGINE = MergeTree ORDER BY id",
		`CREATE TABLE default.` + "`back\\\\slash`" + ` (id UInt64, s String) ENGINE = MergeTree ORDER BY id`,
		"CREATE DATABASE `x``;DROP(TABLE)default`",
		"CREATE TABLE `x``;DROP(TABLE)default`.`events;--` (id UInt64, s String) ENGINE = MergeTree ORDER BY id",
		"CREATE TABLE default.`x``;DROP(TABLE)events;--` (id UInt64, s String) ENGINE = MergeTree ORDER BY id",
	} {
		ch.Exec(t, sql)
	}
	tables := "SELECT database, name FROM system.tables WHERE database != 'system' ORDER BY database, name FORMAT JSONEachRow"
	before := ch.Query(t, tables)
	if !strings.Contains(before, `"name":"back\\slash"`) {
		t.Fatalf("the table created as `back\\\\slash` is not named back\\slash:\n%s", before)
	}
	p := StartChute(t, chFlags(ch)...)
	cli := clusterClient(t, p.ClientAddr)

	put := func(key, value string) {
		t.Helper()
		ctx, cancel := rpcCtx()
		defer cancel()
		if _, err := cli.Put(ctx, key, value); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
	}
	put("/q/ch:events/p/1", `{"id":1,"s":"default"}`)
	waitQuery(t, ch, rowsTimeout, "SELECT count() FROM default.events", "1")

	put("/q/ch:analytics.events/p/1", `{"id":1,"s":"analytics"}`)
	put("/q/clickhouse:analytics.events/p/2", `{"id":2,"s":"analytics"}`)
	ctlOK(t, p, "", "put", "/q/ch:we`ird/p/1", `{"id":1,"s":"weird"}`)
	ctlOK(t, p, "", "put", `/q/ch:back\slash/p/1`, `{"id":1,"s":"backslash"}`)
	// Names with spaces are refused at put (sink.CheckQueue); without,
	// quotes and semicolons reach ClickHouse inside the identifier.
	ctlOK(t, p, "", "put", "/q/ch:x`;DROP(TABLE)default.events;--/p/1", `{"id":1,"s":"dotted"}`)
	put("/q/ch:x`;DROP(TABLE)events;--/p/1", `{"id":1,"s":"plain"}`)
	ctx, cancel := rpcCtx()
	defer cancel()
	if _, err := cli.Put(ctx, "/q/ch:x`; DROP TABLE events; --/p/1", `{"id":1}`); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a name with spaces: got %v, want InvalidArgument", err)
	}
	put("/q/ch:/p/1", "not a row: ch: alone is an ordinary queue")

	for table, want := range map[string]string{
		"analytics.events":                     "2\tanalytics",
		"default.`we``ird`":                    "1\tweird",
		"default.`back\\\\slash`":              "1\tbackslash",
		"`x``;DROP(TABLE)default`.`events;--`": "1\tdotted",
		"default.`x``;DROP(TABLE)events;--`":   "1\tplain",
		"default.events":                       "1\tdefault",
	} {
		waitQuery(t, ch, rowsTimeout, "SELECT count(), any(s) FROM "+table, want)
	}
	for _, q := range []string{"ch:analytics.events", "clickhouse:analytics.events", "ch:we`ird", `ch:back\slash`,
		"ch:x`;DROP(TABLE)default.events;--", "ch:x`;DROP(TABLE)events;--"} {
		waitDrained(t, q, p)
	}
	if after := ch.Query(t, tables); after != before {
		t.Errorf("tables after the puts:\n%s\nwant as before:\n%s", after, before)
	}
	if got := ch.Query(t, "SELECT count() FROM default.events"); got != "1" {
		t.Errorf("default.events: got %s rows, want 1", got)
	}
	if q := mustQueueOn(t, p, "ch:"); q.Rows != 1 {
		t.Errorf("ordinary queue ch:: got depth_rows %d, want 1 (no consumer)", q.Rows)
	}
}

// TestClickHouse_unknownTable puts rows for a table that does not exist:
// they stay queued (/status), the node logs once that the insert failed
// with code 60 naming the table, and after CREATE TABLE they arrive with
// no further put.
func TestClickHouse_unknownTable(t *testing.T) {
	t.Parallel()
	ch := chtest.Start(t)
	p := StartChute(t, chFlags(ch)...)
	ctlPutLoops(t, p, "ch:later", `{"id":%d,"s":"row %d"}`, 0, 10, 2)
	line := waitLogLine(t, p, "insert failed", "queue=ch:later", "code=60")
	if !strings.Contains(line, "`default`.`later`") || !strings.Contains(line, "default.later doesn't exist") {
		t.Errorf("log line %q: want the table `default`.`later` and ClickHouse's message", line)
	}
	waitDepth(t, p, "ch:later", 10)

	ch.Exec(t, "CREATE TABLE default.later (id UInt64, s String) ENGINE = MergeTree ORDER BY id")
	waitQuery(t, ch, rowsTimeout, "SELECT count(), uniqExact(id) FROM default.later", "10\t10")
	waitDrained(t, "ch:later", p)
	waitLogLine(t, p, "inserts into ClickHouse succeed again", "queue=ch:later")
	if lines := logLines(t, p, "queue=ch:later", "code=60"); len(lines) != 1 {
		t.Errorf("log lines of the missing table: got %d, want 1 (once per state change):\n%s", len(lines), strings.Join(lines, "\n"))
	}
}

// TestClickHouse_refusedValues puts values that are not one JSON object to
// ClickHouse queues: clientv3 gets InvalidArgument naming the key, etcdctl
// exits 1 with the message, a transaction holding one is refused whole,
// and nothing is queued.
func TestClickHouse_refusedValues(t *testing.T) {
	t.Parallel()
	p := StartChute(t)
	cli := clusterClient(t, p.ClientAddr)
	values := []string{"", "  ", "not json", `[{"id":1}]`, `{"id":1}{"id":2}`, `{"id":1`, `42`, `"row"`}
	keys := []string{"/q/ch:events/p/x", "/q/clickhouse:events/p/x", "/queue/ch:events/producer/x", "/q/ch:db.events/i/x"}
	for _, key := range keys {
		for _, v := range values {
			ctx, cancel := rpcCtx()
			_, err := cli.Put(ctx, key, v)
			cancel()
			if grpcCode(err) != codes.InvalidArgument || !strings.Contains(err.Error(), key) ||
				!strings.Contains(err.Error(), "JSON object") {
				t.Errorf("clientv3 put %s %q: got %v, want InvalidArgument naming the key and a JSON object", key, v, err)
			}
		}
	}
	ctx, cancel := rpcCtx()
	_, err := cli.Txn(ctx).Then(
		clientv3.OpPut("/q/ch:events/p/good", `{"id":1}`),
		clientv3.OpPut("/q/ch:events/p/bad", `[1]`),
	).Commit()
	cancel()
	if grpcCode(err) != codes.InvalidArgument {
		t.Errorf("txn with a good and a bad row: got %v, want InvalidArgument", err)
	}

	etcdctl := lookTool(t, "etcdctl")
	for _, v := range []string{"", "not json", `[{"id":1}]`} {
		res, err := runEtcdctl(etcdctl, p.ClientAddr, "", "put", "/q/ch:events/p/ctl", v)
		if err != nil {
			t.Fatal(err)
		}
		if res.Code != 1 || res.Stdout != "" ||
			!strings.Contains(res.Stderr, "Error: rpc error: code = InvalidArgument desc = etcdserver: /q/ch:events/p/ctl: sink: ") ||
			!strings.Contains(res.Stderr, "a clickhouse queue takes one JSON object per message") {
			t.Errorf("etcdctl put /q/ch:events/p/ctl %q: got %+v; want exit 1 and InvalidArgument with the message", v, res)
		}
	}

	st, err := statusOf(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range st.Queues {
		if q.Rows != 0 || q.Bytes != 0 || q.Stats.Enqueued != 0 {
			t.Errorf("/status queue %s: depth_rows %d, depth_bytes %d, enqueued %d; want nothing queued",
				q.Name, q.Rows, q.Bytes, q.Stats.Enqueued)
		}
	}
	ctx, cancel = rpcCtx()
	defer cancel()
	if resp, err := cli.Get(ctx, "/q/", clientv3.WithPrefix(), clientv3.WithKeysOnly()); err != nil || len(resp.Kvs) != 0 {
		t.Errorf("keys under /q/: got %v, %v; want none", resp, err)
	}
}

// TestClickHouse_noURL runs a node without --clickhouse-url: rows of a
// ClickHouse queue stay queued, the depth grows with every put, and the
// log says so once, not once per put or per retry.
func TestClickHouse_noURL(t *testing.T) {
	t.Parallel()
	p := StartChute(t)
	ctlPutLoops(t, p, "ch:events", `{"id":%d,"s":"row %d"}`, 0, 10, 2)
	waitDepth(t, p, "ch:events", 10)
	waitLogLine(t, p, "no clickhouse_url", "queue=ch:events")
	cli := clusterClient(t, p.ClientAddr)
	for i := 10; i < 60; i++ {
		ctx, cancel := rpcCtx()
		_, err := cli.Put(ctx, fmt.Sprintf("/q/ch:events/p/%d", i), fmt.Sprintf(`{"id":%d}`, i))
		cancel()
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	waitDepth(t, p, "ch:events", 60)
	q := mustQueueOn(t, p, "ch:events")
	if q.Stats.Enqueued != 60 || q.Stats.Acked != 0 {
		t.Errorf("/status ch:events: enqueued %d, acked %d; want 60, 0", q.Stats.Enqueued, q.Stats.Acked)
	}
	lines := logLines(t, p, "clickhouse_url")
	if len(lines) != 1 {
		t.Errorf("log lines about the missing clickhouse_url after 60 puts: got %d, want 1:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "level=WARN") }) {
		t.Errorf("log lines about the missing clickhouse_url: %q, want a warning", lines)
	}
}
