package dispatch

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestParseSettings_insertSettings(t *testing.T) {
	def := Config{}.withDefaults().defaults()
	good := []struct{ raw, want string }{
		{`{"settings":{"input_format_skip_unknown_fields":1,"date_time_input_format":"best_effort"}}`,
			"date_time_input_format=best_effort,input_format_skip_unknown_fields=1"},
		{`{"settings":{"a":true,"b":false,"c":-1.50e3,"d":18446744073709551615}}`, "a=1,b=0,c=-1.50e3,d=18446744073709551615"},
		{`{"settings":{}}`, ""},
		{`{"ack":"queued"}`, ""},
	}
	for _, tt := range good {
		s, err := parseSettings("ch:events", []byte(tt.raw), def)
		if err != nil || s.Insert.String() != tt.want {
			t.Errorf("parseSettings(%s): got %q, %v, want %q", tt.raw, s.Insert.String(), err, tt.want)
		}
	}
	bad := []struct{ raw, want string }{
		{`{"settings":{"a&b":1}}`, `settings: name "a&b": want lower-case letters`},
		{`{"settings":{"a\"b":1}}`, `settings: name "a\"b"`},
		{`{"settings":{"query":"DROP TABLE x"}}`, `settings: name "query": chute sets it itself`},
		{`{"settings":{"password":"x"}}`, `settings: name "password"`},
		{`{"settings":{"database":"other"}}`, `settings: name "database"`},
		{`{"settings":{"a":null}}`, `"a": want a number, a string or a boolean`},
		{`{"settings":{"a":{"b":1}}}`, `"a": want a number, a string or a boolean`},
		{`{"settings":{"a":[1]}}`, `"a": want a number, a string or a boolean`},
		{`{"settings":{"a":"x\u0000y"}}`, `"a": value holds control byte 0x00`},
		{`{"settings":{"a":"` + strings.Repeat("x", 1025) + `"}}`, `at most 1024`},
		{`{"settings":[1]}`, `settings`},
	}
	for _, tt := range bad {
		if _, err := parseSettings("ch:events", []byte(tt.raw), def); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseSettings(%.60s): got %v, want an error containing %q", tt.raw, err, tt.want)
		}
	}
}

// TestManager_Check_refusesInsertSettings checks that a settings key
// whose ClickHouse settings could change the query is refused when put,
// with etcd's InvalidArgument naming the key and the setting.
func TestManager_Check_refusesInsertSettings(t *testing.T) {
	n := startNode(t, nil)
	cli := n.client(t)
	ctx := testCtx(t, 10*time.Second)
	for _, tt := range []struct{ value, want string }{
		{`{"settings":{"a&b":1}}`, `etcdserver: /config/queues/ch:x: settings: name "a&b": `},
		{`{"settings":{"it's":1}}`, `etcdserver: /config/queues/ch:x: settings: name "it's": `},
		{`{"settings":{"user":"default"}}`, `etcdserver: /config/queues/ch:x: settings: name "user": `},
	} {
		_, err := cli.Put(ctx, SettingsKey("ch:x"), tt.value)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("put %s: got %v, want InvalidArgument containing %q", tt.value, err, tt.want)
		}
	}
	if _, err := cli.Put(ctx, SettingsKey("ch:x"), `{"settings":{"input_format_skip_unknown_fields":1}}`); err != nil {
		t.Fatalf("good settings: got %v, want them stored", err)
	}
	if got := n.mgr.settingsOf("ch:x").Insert.String(); got != "input_format_skip_unknown_fields=1" {
		t.Fatalf("queue's insert settings: got %q, want input_format_skip_unknown_fields=1", got)
	}
}
