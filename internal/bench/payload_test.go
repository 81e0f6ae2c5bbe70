package bench

import (
	"encoding/json"
	"strings"
	"testing"
)

// payloadConfig is a Config with the fields newPayload reads.
func payloadConfig(prefix string, keySize, valSize int, tables ...string) Config {
	return Config{KeyPrefix: prefix, KeySize: keySize, ValSize: valSize, Tables: tables}
}

func TestPayload_keyFor_distinctAndSized(t *testing.T) {
	p := newPayload(payloadConfig("bench/ab12/", 16, 8), 1)
	seen := make(map[string]bool)
	for n := range int64(5000) {
		k := p.keyFor(n, 0)
		if !strings.HasPrefix(k, "bench/ab12/") {
			t.Fatalf("key %q: want prefix bench/ab12/", k)
		}
		if len(k) < 16 {
			t.Fatalf("key %q: got length %d, want at least 16", k, len(k))
		}
		if seen[k] {
			t.Fatalf("key %q repeated at n=%d", k, n)
		}
		seen[k] = true
	}
}

func TestPayload_keyFor_longerThanKeySize(t *testing.T) {
	p := newPayload(payloadConfig("a-long-prefix/", 4, 0), 1)
	if got, want := p.keyFor(35, 3), "a-long-prefix/z"; got != want {
		t.Errorf("keyFor(35): got %q, want %q", got, want)
	}
}

func TestPayload_keyFor_queues(t *testing.T) {
	p := newPayload(payloadConfig("bench/x/", 16, 64, "t0", "t1"), 1)
	seen := make(map[string]bool)
	for n := range int64(1000) {
		q := int(n % 3) // wraps around the two tables
		k := p.keyFor(n, q)
		prefix := queueKeyPrefix([]string{"t0", "t1"}[q%2])
		tail, ok := strings.CutPrefix(k, prefix)
		if !ok || len(tail) != 16 || strings.ContainsRune(tail, '/') {
			t.Fatalf("keyFor(%d, %d): got %q, want %s and a 16-byte message key without /", n, q, k, prefix)
		}
		if seen[k] {
			t.Fatalf("key %q repeated", k)
		}
		seen[k] = true
	}
	if got := queueKeyPrefix("t0"); got != "/q/ch:t0/p/" {
		t.Errorf("queueKeyPrefix: got %q", got)
	}
	if got := queueRecordKey("t0"); got != "/q/ch:t0" {
		t.Errorf("queueRecordKey: got %q", got)
	}
}

func TestPayload_valueFor_sizedAndPrintable(t *testing.T) {
	for _, size := range []int{0, 1, 256, 4096} {
		p := newPayload(payloadConfig("", 1, size), 7)
		for n := range int64(130) {
			v := p.valueFor(n)
			if len(v) != size {
				t.Fatalf("size %d: got length %d", size, len(v))
			}
			if strings.Trim(v, alphabet) != "" {
				t.Fatalf("size %d: value %q has bytes outside the alphabet", size, v)
			}
		}
	}
}

func TestPayload_valueFor_rows(t *testing.T) {
	for _, size := range []int{0, 16, 17, 256, 4096} {
		p := newPayload(payloadConfig("", 1, size, "t"), 7)
		for _, n := range []int64{0, 9, 10, 12345, 1 << 40} {
			v := p.valueFor(n)
			var row struct {
				ID uint64 `json:"id"`
				V  string `json:"v"`
			}
			if err := json.Unmarshal([]byte(v), &row); err != nil || row.ID != uint64(n) {
				t.Fatalf("size %d, n %d: got %q (%v), want a row with id %d", size, n, v, err, n)
			}
			least := len(`{"id":,"v":""}`) + len(jsonNumber(n))
			if want := max(size, least); len(v) != want {
				t.Errorf("size %d, n %d: got %d bytes %q, want %d", size, n, len(v), v, want)
			}
		}
	}
}

func jsonNumber(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestRunTables(t *testing.T) {
	if got := strings.Join(runTables("ab12", 3), ","); got != "bench_ab12_0,bench_ab12_1,bench_ab12_2" {
		t.Errorf("runTables: got %s", got)
	}
}

func TestNewRunID(t *testing.T) {
	id := newRunID()
	if len(id) != 4 || strings.Trim(id, runIDAlphabet) != "" {
		t.Errorf("newRunID: got %q, want 4 characters of %q", id, runIDAlphabet)
	}
}
