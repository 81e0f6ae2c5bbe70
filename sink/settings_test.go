package sink

import (
	"errors"
	"strings"
	"testing"
)

func TestParseSettings_encodesSortedAndEscaped(t *testing.T) {
	s, err := ParseSettings(map[string]string{
		"input_format_skip_unknown_fields": "1",
		"date_time_input_format":           "best_effort",
		"format_csv_delimiter":             "a b&c=d%",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "&date_time_input_format=best_effort&format_csv_delimiter=a%20b%26c%3Dd%25&input_format_skip_unknown_fields=1"
	if got := s.query(); got != want {
		t.Fatalf("query: got %s, want %s", got, want)
	}
	if got, ok := s.Get("format_csv_delimiter"); !ok || got != "a b&c=d%" {
		t.Fatalf("Get: got %q, %v, want the value as given", got, ok)
	}
	if got := s.Len(); got != 3 {
		t.Fatalf("Len: got %d, want 3", got)
	}
	again, _ := ParseSettings(map[string]string{"format_csv_delimiter": "a b&c=d%", "input_format_skip_unknown_fields": "1", "date_time_input_format": "best_effort"})
	if again != s {
		t.Fatalf("the same settings: got %v != %v, want ==", again, s)
	}
}

func TestParseSettings_refuses(t *testing.T) {
	tests := []struct {
		name, value, want string
	}{
		{"a&b", "1", `name "a&b"`},
		{`a"b`, "1", `name "a\"b"`},
		{"A", "1", `name "A"`},
		{"1a", "1", `name "1a"`},
		{"", "1", "empty name"},
		{strings.Repeat("a", MaxSettingName+1), "1", "at most 128"},
		{"query", "SELECT 1", `name "query"`},
		{"database", "other", `name "database"`},
		{"user", "admin", `name "user"`},
		{"password", "x", `name "password"`},
		{"query_id", "x", `name "query_id"`},
		{"session_id", "x", `name "session_id"`},
		{TokenSetting, "x", `name "insert_deduplication_token"`},
		{"param_id", "1", `name "param_id"`},
		// A batch must stay one block: all or nothing.
		{"max_insert_block_size", "10", `name "max_insert_block_size"`},
		{"min_insert_block_size_rows", "10", `name "min_insert_block_size_rows"`},
		{"min_insert_block_size_bytes", "10", `name "min_insert_block_size_bytes"`},
		{"max_threads", strings.Repeat("9", MaxSettingValue+1), "at most 1024"},
		{"max_threads", "1\n2", "control byte 0x0a"},
		{"max_threads", "1\x7f", "control byte 0x7f"},
	}
	for _, tt := range tests {
		_, err := ParseSettings(map[string]string{tt.name: tt.value})
		if !errors.Is(err, ErrBadSetting) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%.40q=%.20q: got %v, want ErrBadSetting containing %q", tt.name, tt.value, err, tt.want)
		}
	}
	many := make(map[string]string)
	for i := range MaxSettingsCount + 1 {
		many["s"+strings.Repeat("x", i)] = "1"
	}
	if _, err := ParseSettings(many); !errors.Is(err, ErrBadSetting) {
		t.Errorf("%d settings: got %v, want ErrBadSetting", len(many), err)
	}
}

func TestParseSettingsText(t *testing.T) {
	tests := []struct {
		text, want string // want: String(), or "error"
	}{
		{"", ""},
		{"  ", ""},
		{"a=1", "a=1"},
		{"b=2, a=1", "a=1,b=2"},
		{"a=1,b=x,y", "a=1,b=x,y"},
		{"a=x,y=z", "a=x,y=z"},
		{"a=1,x&y=2", "error"},
		{"a=1,", "a=1"},
		{"a=", "a="},
		{"a= x y ", "a=x y"},
		{"a=1,a=2", "error"},
		{"nope", "error"},
		{"A=1", "error"},
		{"query=1", "error"},
		{"input_format_allow_errors_num=10", "error"}, // a bad row skipped, in no dead letter
		{"input_format_allow_errors_ratio=0.1", "error"},
		{"a&b=1", "error"},
		// A JSON object keeps a value's commas, '=' and spaces (the
		// config file's YAML mapping).
		{`{"log_comment":"from chute, node=a","d":","}`, "d=,,log_comment=from chute, node=a"},
		{` {"a":"1"} `, "a=1"},
		{`{"a":1}`, "error"},
		{`{"a":"1"`, "error"},
		{`{"user":"x"}`, "error"},
	}
	for _, tt := range tests {
		s, err := ParseSettingsText(tt.text)
		switch {
		case tt.want == "error":
			if !errors.Is(err, ErrBadSetting) {
				t.Errorf("%q: got %v, %v, want ErrBadSetting", tt.text, s, err)
			}
		case err != nil:
			t.Errorf("%q: got %v, want %q", tt.text, err, tt.want)
		case s.String() != tt.want:
			t.Errorf("%q: got %q, want %q", tt.text, s.String(), tt.want)
		}
	}
}

func TestSettings_Override_queueWinsByName(t *testing.T) {
	cluster, _ := ParseSettingsText("a=1,c=3,e=5")
	queue, _ := ParseSettingsText("b=20,c=30,f=60")
	if got, want := cluster.Override(queue).String(), "a=1,b=20,c=30,e=5,f=60"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if got := cluster.Override(Settings{}); got != cluster {
		t.Fatalf("override by none: got %v, want %v", got, cluster)
	}
	if got := (Settings{}).Override(queue); got != queue {
		t.Fatalf("none overridden: got %v, want %v", got, queue)
	}
}

func TestInsertURI_settingsBeforeToken(t *testing.T) {
	s, _ := ParseSettingsText("input_format_skip_unknown_fields=1")
	got := insertURI("`d`.`t`", "tok", s)
	want := "/?query=INSERT%20INTO%20%60d%60.%60t%60%20FORMAT%20JSONEachRow" + pinnedSettings + "&input_format_skip_unknown_fields=1&insert_deduplication_token=tok"
	if got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func FuzzParseSettingsText(f *testing.F) {
	for _, s := range []string{"a=1", "a=1,b=x,y", "a&b=1", "q=%00", "a=\x01"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := ParseSettingsText(text)
		if err != nil {
			return
		}
		for name, value := range s.All() {
			if err := CheckSetting(name, value); err != nil {
				t.Fatalf("%q: accepted %q=%q, which CheckSetting refuses: %v", text, name, value, err)
			}
		}
		q := s.query()
		if strings.ContainsAny(q, " \x00\n#") || strings.Count(q, "=") != s.Len() {
			t.Fatalf("%q: query %q is not one name=value per setting", text, q)
		}
	})
}
