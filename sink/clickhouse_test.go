//go:build e2e

package sink

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"chute/internal/chtest"
)

// The tests in this file run against a real ClickHouse (Debian's 18.16,
// started by internal/chtest on free loopback ports). A missing
// clickhouse-server fails them; they never skip.

const (
	chUser     = "alice"
	chPassword = "s3cr3t:p@ss/word"
)

// chEndpoint returns the endpoint of srv as user with password, parsed
// from a URL as clickhouse_url would give it.
func chEndpoint(t *testing.T, srv *chtest.Server, user, password string) Endpoint {
	t.Helper()
	raw := "http://" + srv.HTTPAddr()
	if user != "" && password == "" {
		raw = "http://" + user + "@" + srv.HTTPAddr()
	} else if user != "" {
		raw = "http://" + user + ":" + strings.ReplaceAll(password, "/", "%2F") + "@" + srv.HTTPAddr() + "/ignored?x=1"
	}
	ep, err := ParseURL(raw)
	if err != nil {
		t.Fatalf("ParseURL(%q): %v", Redact(raw, Endpoint{User: user, Password: password}), err)
	}
	return ep
}

func TestClickHouse(t *testing.T) {
	srv := chtest.Start(t, chtest.Options{User: chUser, Password: chPassword})
	c := NewClient(ClientConfig{Timeout: 20 * time.Second})
	ctx := context.Background()
	ep := chEndpoint(t, srv, "", "")
	alice := chEndpoint(t, srv, chUser, chPassword)

	t.Run("insert", func(t *testing.T) {
		srv.Exec(t, "CREATE TABLE default.ins (id UInt64, big UInt64, n Int64, s String) ENGINE = MergeTree ORDER BY id")
		rows := [][]byte{
			[]byte(`{"id":1,"big":18446744073709551615,"n":9007199254740993,"s":"a"}`),
			[]byte(`{"id":2,"big":9007199254740993,"n":-9223372036854775808,"s":"caf\u00e9 \"q\""}`),
			[]byte(` {"id":3,"big":0,"n":0,"s":"日本"} `),
		}
		res := c.Insert(ctx, alice, Target("", "ins"), rows, "")
		if !res.OK() {
			t.Fatalf("Insert: got %+v, want OK", res)
		}
		if n := srv.Count(t, "default.ins"); n != 3 {
			t.Fatalf("count: got %d, want 3", n)
		}
		got := srv.Query(t, "SELECT id, big, n, s FROM default.ins ORDER BY id FORMAT TSV")
		want := "1\t18446744073709551615\t9007199254740993\ta\n" +
			"2\t9007199254740993\t-9223372036854775808\tcafé \"q\"\n" +
			"3\t0\t0\t日本\n"
		if strings.TrimSpace(got) != strings.TrimSpace(want) {
			t.Errorf("rows:\n got %q\nwant %q", got, want)
		}
	})

	t.Run("database in the queue name", func(t *testing.T) {
		srv.Exec(t, "CREATE DATABASE analytics")
		srv.Exec(t, "CREATE TABLE analytics.events (id UInt64) ENGINE = MergeTree ORDER BY id")
		table, ok := TableOf("ch:analytics.events")
		if !ok {
			t.Fatal("ch:analytics.events is not a ClickHouse queue")
		}
		res := c.Insert(ctx, ep, Target("other", table), [][]byte{[]byte(`{"id":7}`)}, "")
		if !res.OK() {
			t.Fatalf("Insert: got %+v", res)
		}
		if n := srv.Count(t, "analytics.events"); n != 1 {
			t.Fatalf("count: got %d, want 1", n)
		}
	})

	t.Run("identifiers with a backquote and a backslash", func(t *testing.T) {
		name := "we`ird\\name"
		srv.Exec(t, "CREATE TABLE default."+QuoteIdent(name)+" (id UInt64) ENGINE = MergeTree ORDER BY id")
		if got := strings.TrimSpace(srv.Query(t, "SELECT name FROM system.tables WHERE database = 'default' AND name LIKE 'we%' FORMAT TSVRaw")); got != name {
			t.Fatalf("table name: got %q, want %q", got, name)
		}
		res := c.Insert(ctx, ep, Target("", name), [][]byte{[]byte(`{"id":1}`), []byte(`{"id":2}`)}, "")
		if !res.OK() {
			t.Fatalf("Insert: got %+v", res)
		}
		if got := strings.TrimSpace(srv.Query(t, "SELECT count() FROM default."+QuoteIdent(name))); got != "2" {
			t.Fatalf("count: got %s, want 2", got)
		}
	})

	t.Run("data errors", func(t *testing.T) {
		srv.Exec(t, "CREATE TABLE default.typed (id UInt64, e Enum8('a' = 1), d Date) ENGINE = MergeTree ORDER BY id")
		tests := []struct {
			row   string
			codes []int // what 18.16 answers
		}{
			{`{"id":"x"}`, []int{27}},
			{`{"id":-1}`, []int{72}},
			{`{"id":1,"zz":1}`, []int{117}},
			{`{"id":1,"d":"xx"}`, []int{38}},
			{`{"id":1,"e":"zz"}`, []int{49, 36, 691}}, // 18.16: 49 with a row position
			{`{"id":1`, []int{33}},
		}
		for _, tt := range tests {
			res := c.Insert(ctx, ep, Target("", "typed"), [][]byte{[]byte(`{"id":1}`), []byte(tt.row)}, "")
			if res.Class != ClassData || !contains(tt.codes, res.Code) {
				t.Errorf("row %s: got class %s code %d (%s), want data %v", tt.row, res.Class, res.Code, res.Message, tt.codes)
			}
		}
		if n := srv.Count(t, "default.typed"); n != 0 {
			t.Errorf("count after refused batches: got %d, want 0", n)
		}
	})

	t.Run("rows a computed column refuses", func(t *testing.T) {
		// A MATERIALIZED or DEFAULT expression that fails on one row:
		// 18.16 answers 500 with no row position. As transient, the
		// batch was sent again for ever and never bisected.
		srv.Exec(t, "CREATE TABLE default.computed (a Int32, b Int32, s String, q Int32 MATERIALIZED intDiv(a, b), "+
			"c UInt8 MATERIALIZED throwIf(a > 10), e Enum8('a' = 1) MATERIALIZED CAST(s, 'Enum8(\\'a\\' = 1)')) ENGINE = MergeTree ORDER BY a")
		tests := []struct {
			row   string
			codes []int // what 18.16 answers, and later releases
		}{
			{`{"a":4,"b":0,"s":"a"}`, []int{153}},      // ILLEGAL_DIVISION
			{`{"a":40,"b":1,"s":"a"}`, []int{395}},     // FUNCTION_THROW_IF_VALUE_IS_NON_ZERO
			{`{"a":1,"b":1,"s":"zz"}`, []int{49, 691}}, // 18.16: 49 with no row position
		}
		for _, tt := range tests {
			res := c.Insert(ctx, ep, Target("", "computed"), [][]byte{[]byte(`{"a":1,"b":1,"s":"a"}`), []byte(tt.row)}, "")
			if res.Class != ClassData || !contains(tt.codes, res.Code) {
				t.Errorf("row %s: got class %s code %d (%s), want data %v", tt.row, res.Class, res.Code, res.Message, tt.codes)
			}
		}
		if n := srv.Count(t, "default.computed"); n != 0 {
			t.Errorf("count after refused batches: got %d, want 0", n)
		}
	})

	t.Run("unknown table and database", func(t *testing.T) {
		res := c.Insert(ctx, ep, Target("", "nope"), [][]byte{[]byte(`{"id":1}`)}, "")
		if res.Class != ClassConfig || res.Code != 60 {
			t.Errorf("unknown table: got %+v, want config 60", res)
		}
		res = c.Insert(ctx, ep, Target("nodb", "nope"), [][]byte{[]byte(`{"id":1}`)}, "")
		if res.Class != ClassConfig || res.Code != 81 {
			t.Errorf("unknown database: got %+v, want config 81", res)
		}
	})

	t.Run("passwords", func(t *testing.T) {
		srv.Exec(t, "CREATE TABLE default.auth (id UInt64) ENGINE = MergeTree ORDER BY id")
		if res := c.Insert(ctx, alice, Target("", "auth"), [][]byte{[]byte(`{"id":1}`)}, ""); !res.OK() {
			t.Fatalf("right password: got %+v", res)
		}
		wrong := alice
		wrong.Password = "n0t-" + chPassword
		res := c.Insert(ctx, wrong, Target("", "auth"), [][]byte{[]byte(`{"id":2}`)}, "")
		if res.Class != ClassConfig || res.Code != 193 {
			t.Errorf("wrong password: got %+v, want config 193", res)
		}
		nobody := Endpoint{Addr: alice.Addr, User: "bob", Password: chPassword}
		res2 := c.Insert(ctx, nobody, Target("", "auth"), [][]byte{[]byte(`{"id":2}`)}, "")
		if res2.Class != ClassConfig || res2.Code != 192 {
			t.Errorf("unknown user: got %+v, want config 192", res2)
		}
		for _, r := range []Result{res, res2} {
			for _, secret := range []string{chPassword, wrong.Password, wrong.AuthHeader(), nobody.AuthHeader()} {
				if strings.Contains(r.Message, secret) || strings.Contains(fmt.Sprint(r), secret) {
					t.Errorf("result %+v shows a secret", r)
				}
			}
		}
		if n := srv.Count(t, "default.auth"); n != 1 {
			t.Errorf("count: got %d, want 1", n)
		}
	})

	t.Run("bisect", func(t *testing.T) {
		srv.Exec(t, "CREATE TABLE default.bis (id UInt64, s String) ENGINE = MergeTree ORDER BY id")
		const n, bad = 1000, 613
		rows := make([][]byte, n)
		for i := range rows {
			rows[i] = fmt.Appendf(nil, `{"id":%d,"s":"row %d"}`, i, i)
		}
		rows[bad] = []byte(`{"id":"not a number","s":"bad"}`)
		target := Target("", "bis")
		requests := 0
		insert := func(ctx context.Context, _ []int, part [][]byte) Result {
			requests++
			return c.Insert(ctx, ep, target, part, "")
		}
		first := insert(ctx, nil, rows)
		if first.Class != ClassData {
			t.Fatalf("the whole batch: got %+v, want a data error", first)
		}
		refused, err := Bisect(ctx, insert, rows, first)
		if err != nil {
			t.Fatal(err)
		}
		if len(refused) != 1 || refused[0].Index != bad || string(refused[0].Row) != string(rows[bad]) || refused[0].Result.Code != 27 {
			t.Fatalf("refused: got %+v, want row %d with code 27", refused, bad)
		}
		if got := srv.Count(t, "default.bis"); got != n-1 {
			t.Errorf("count: got %d, want %d", got, n-1)
		}
		if got := strings.TrimSpace(srv.Query(t, fmt.Sprintf("SELECT count() FROM default.bis WHERE id = %d", bad))); got != "0" {
			t.Errorf("the bad row's id is in the table: %s", got)
		}
		if got := strings.TrimSpace(srv.Query(t, "SELECT uniqExact(id) FROM default.bis")); got != fmt.Sprint(n-1) {
			t.Errorf("distinct ids: got %s, want %d (a row went in twice?)", got, n-1)
		}
		// 18.16 names the row: the batch, the rows after it, the rows
		// before it.
		if requests != 3 {
			t.Errorf("%d requests, want 3", requests)
		}
	})

	t.Run("settings", func(t *testing.T) {
		has, err := c.HasSetting(ctx, alice, TokenSetting)
		if err != nil || has {
			t.Errorf("HasSetting(%s) on 18.16: got %v, %v; want false", TokenSetting, has, err)
		}
		has, err = c.HasSetting(ctx, alice, "insert_deduplicate")
		if err != nil || !has {
			t.Errorf("HasSetting(insert_deduplicate): got %v, %v; want true", has, err)
		}
		// Sending the token anyway is what HasSetting is there to prevent.
		res := c.Insert(ctx, ep, Target("", "ins"), [][]byte{[]byte(`{"id":9}`)}, "t1")
		if res.Class != ClassConfig || res.Code != 115 {
			t.Errorf("insert with a token on 18.16: got %+v, want config 115", res)
		}
		wrong := alice
		wrong.Password = "nope"
		if _, err := c.HasSetting(ctx, wrong, TokenSetting); err == nil || strings.Contains(err.Error(), "nope") {
			t.Errorf("HasSetting with a wrong password: got %v", err)
		}
	})

	t.Run("server down", func(t *testing.T) {
		srv.Exec(t, "CREATE TABLE default.down (id UInt64) ENGINE = MergeTree ORDER BY id")
		srv.Stop(t)
		res := c.Insert(ctx, ep, Target("", "down"), [][]byte{[]byte(`{"id":1}`)}, "")
		if res.Class != ClassTransient || res.Err == nil {
			t.Errorf("server stopped: got %+v, want a transient transport error", res)
		}
		srv.Restart(t)
		ep := chEndpoint(t, srv, "", "") // the port may change
		if res := c.Insert(ctx, ep, Target("", "down"), [][]byte{[]byte(`{"id":1}`)}, ""); !res.OK() {
			t.Fatalf("after restart: got %+v", res)
		}
		if n := srv.Count(t, "default.down"); n != 1 {
			t.Errorf("count: got %d, want 1", n)
		}
	})
}

func contains(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// A server short of memory answers 241, which is transient: the batch is
// kept for a later retry, not bisected. ClickHouse answers before it has
// read the whole body and closes the connection; the answer still counts.
func TestClickHouse_memoryLimitIsTransient(t *testing.T) {
	srv := chtest.Start(t, chtest.Options{User: "small", Settings: map[string]string{"max_memory_usage": "12000000"}})
	srv.Exec(t, "CREATE TABLE default.mem (id UInt64, s String) ENGINE = MergeTree ORDER BY id")
	c := NewClient(ClientConfig{Timeout: 20 * time.Second})
	ep := chEndpoint(t, srv, "small", "")
	row := []byte(`{"id":1,"s":"` + strings.Repeat("x", 16<<20) + `"}`)
	res := c.Insert(context.Background(), ep, Target("", "mem"), [][]byte{row}, "")
	if res.Class != ClassTransient || res.Code != 241 || res.Err != nil {
		t.Fatalf("got %+v, want transient 241 from ClickHouse", res)
	}
	if res := c.Insert(context.Background(), ep, Target("", "mem"), [][]byte{[]byte(`{"id":2,"s":"small"}`)}, ""); !res.OK() {
		t.Fatalf("a small row: got %+v, want OK", res)
	}
}

// TestClickHouse_profileAllowingErrorsSkipsNoRow: a user whose settings
// profile lets ClickHouse skip rows it cannot parse got OK for a batch
// with a bad row, which was then in no table and no dead letter. chute
// pins those settings on every INSERT: the batch is refused as data, and
// nothing of it is written.
func TestClickHouse_profileAllowingErrorsSkipsNoRow(t *testing.T) {
	srv := chtest.Start(t, chtest.Options{User: "lenient", Settings: map[string]string{
		"input_format_allow_errors_num": "1000", "input_format_allow_errors_ratio": "0.5", "max_insert_block_size": "2"}})
	srv.Exec(t, "CREATE TABLE default.lenient (id UInt64, a UInt32) ENGINE = MergeTree ORDER BY id")
	c := NewClient(ClientConfig{Timeout: 20 * time.Second})
	ep := chEndpoint(t, srv, "lenient", "")
	rows := [][]byte{[]byte(`{"id":1,"a":1}`), []byte(`{"id":2,"a":"bad"}`), []byte(`{"id":3,"a":3}`), []byte(`{"id":4,"a":4}`)}
	res := c.Insert(context.Background(), ep, Target("default", "lenient"), rows, "")
	if res.OK() || res.Class != ClassData {
		t.Fatalf("a batch with a row ClickHouse cannot parse, for a user whose profile allows errors: got %+v, want refused as data", res)
	}
	if n := srv.Count(t, "default.lenient"); n != 0 {
		t.Fatalf("%d rows of the refused batch in the table, want 0", n)
	}
}

// TestClickHouse_longRequestLineIsConfig: 18.16 refuses a request line
// past 16 KiB with an empty 400, which long insert settings make (they
// go in the URL, escaped). That says nothing of the rows: it is a config
// error to retry and report, not data to bisect into dead letters row
// by row.
func TestClickHouse_longRequestLineIsConfig(t *testing.T) {
	srv := chtest.Start(t)
	srv.Exec(t, "CREATE TABLE default.long (id UInt64) ENGINE = MergeTree ORDER BY id")
	c := NewClient(ClientConfig{Timeout: 20 * time.Second})
	ep := chEndpoint(t, srv, "", "")
	long := map[string]string{}
	for _, name := range []string{"format_schema", "format_csv_delimiter", "network_compression_method", "count_distinct_implementation",
		"load_balancing", "distributed_product_mode", "totals_mode", "join_default_strictness"} {
		long[name] = strings.Repeat("é", 512) // 1 KiB, 3 KiB escaped
	}
	s, err := ParseSettings(long)
	if err != nil {
		t.Fatal(err)
	}
	ep.Settings = s
	res := c.Insert(context.Background(), ep, Target("default", "long"), [][]byte{[]byte(`{"id":1}`), []byte(`{"id":2}`)}, "")
	if res.Status != 400 || res.Code != 0 || res.Class != ClassConfig {
		t.Fatalf("an insert whose request line is past 16 KiB: got status %d code %d class %s (%q), want an empty 400 as config",
			res.Status, res.Code, res.Class, res.Message)
	}
}
