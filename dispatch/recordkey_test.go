package dispatch

import "testing"

// TestManager_RecordKey_producerKeysOnly: kv asks it for every put when
// auth is enabled; only producer keys of a named queue have a record to
// check, in its canonical /q/ spelling.
func TestManager_RecordKey_producerKeysOnly(t *testing.T) {
	var m Manager
	for _, tc := range []struct {
		key, want string
		ok        bool
	}{
		{"/q/ch:events/p/1", "/q/ch:events", true},
		{"/queue/ch:events/producer/1", "/q/ch:events", true},
		{"/q/ch:events", "", false},
		{"/q/ch:events/c/1", "", false},
		{"/q//p/1", "", false},
		{"/config/queues/ch:events", "", false},
	} {
		got, ok := m.RecordKey([]byte(tc.key))
		if string(got) != tc.want || ok != tc.ok {
			t.Errorf("RecordKey(%q): got %q, %v, want %q, %v", tc.key, got, ok, tc.want, tc.ok)
		}
	}
}
