package dispatch

import (
	"testing"

	"chute/kv"
)

func TestParseKey(t *testing.T) {
	tests := []struct {
		key  string
		want Key
	}{
		{"/q/jobs", Key{Kind: KindRecord, Prefix: "q", Queue: "jobs"}},
		{"/queue/jobs", Key{Kind: KindRecord, Prefix: "queue", Queue: "jobs"}},
		{"/q/jobs/p/m1", Key{Kind: KindProduce, Prefix: "q", Queue: "jobs", Tail: "m1"}},
		{"/queue/jobs/producer/m1", Key{Kind: KindProduce, Prefix: "queue", Queue: "jobs", Tail: "m1"}},
		{"/q/jobs/i/m1", Key{Kind: KindProduce, Prefix: "q", Queue: "jobs", Tail: "m1"}},
		{"/q/jobs/input/m1", Key{Kind: KindProduce, Prefix: "q", Queue: "jobs", Tail: "m1"}},
		{"/q/ch:events/p/42", Key{Kind: KindProduce, Prefix: "q", Queue: "ch:events", Tail: "42"}},
		{"/q/jobs/c/2b8f0a1e-0000-4000-8000-000000000001", Key{Kind: KindConsumer, Prefix: "q", Queue: "jobs", Consumer: "2b8f0a1e-0000-4000-8000-000000000001"}},
		{"/queue/jobs/consumer/u1", Key{Kind: KindConsumer, Prefix: "queue", Queue: "jobs", Consumer: "u1"}},
		{"/q/jobs/7/m1", Key{Kind: KindDelivery, Prefix: "q", Queue: "jobs", Seq: 7, Tail: "m1"}},
		{"/q/jobs/c/u1/7/m1", Key{Kind: KindDelivery, Prefix: "q", Queue: "jobs", Consumer: "u1", Seq: 7, Tail: "m1"}},
		{"/q/jobs/dlq/3", Key{Kind: KindDeadLetter, Prefix: "q", Queue: "jobs", Seq: 3}},
		// Invalid: under a queue but none of the forms.
		{"/q/jobs/", Key{Kind: KindInvalid, Prefix: "q", Queue: "jobs"}},
		{"/q/jobs/p", Key{Kind: KindInvalid, Prefix: "q", Queue: "jobs"}},
		{"/q/jobs/p/", Key{Kind: KindInvalid, Prefix: "q", Queue: "jobs"}},
		{"/q/jobs/p/a/b", Key{Kind: KindInvalid, Prefix: "q", Queue: "jobs"}},
		{"/q/jobs/x/m1", Key{Kind: KindInvalid, Prefix: "q", Queue: "jobs"}},
		{"/q/jobs/07/m1", Key{Kind: KindInvalid, Prefix: "q", Queue: "jobs"}},
		{"/q/jobs/0/m1", Key{Kind: KindInvalid, Prefix: "q", Queue: "jobs"}},
		{"/q/jobs/-1/m1", Key{Kind: KindInvalid, Prefix: "q", Queue: "jobs"}},
		{"/q/jobs/dlq/x", Key{Kind: KindInvalid, Prefix: "q", Queue: "jobs"}},
		{"/q/jobs/c/u1/x/m1", Key{Kind: KindInvalid, Prefix: "q", Queue: "jobs"}},
		{"/q/jobs/c//7/m1", Key{Kind: KindInvalid, Prefix: "q", Queue: "jobs"}},
		// An empty queue name: a put to its producer key is refused by name.
		{"/q//p/x", Key{Kind: KindProduce, Prefix: "q", Tail: "x"}},
		{"/queue//input/x", Key{Kind: KindProduce, Prefix: "queue", Tail: "x"}},
		{"/q//", Key{Kind: KindInvalid, Prefix: "q"}},
		{"/q//p", Key{Kind: KindInvalid, Prefix: "q"}},
		{"/q//p/", Key{Kind: KindInvalid, Prefix: "q"}},
		{"/q//c/u1", Key{Kind: KindInvalid, Prefix: "q"}},
		{"/q//7/m1", Key{Kind: KindInvalid, Prefix: "q"}},
		// Outside the namespace.
		{"/q", Key{Kind: KindNone}},
		{"/q/", Key{Kind: KindNone}},
		{"/qq/jobs/p/m", Key{Kind: KindNone}},
		{"q/jobs/p/m", Key{Kind: KindNone}},
		{"/secret/db_pw", Key{Kind: KindNone}},
		{"", Key{Kind: KindNone}},
	}
	for _, tt := range tests {
		if got := ParseKey(tt.key); got != tt.want {
			t.Errorf("ParseKey(%q): got %+v, want %+v", tt.key, got, tt.want)
		}
	}
}

func TestDeliveryKey_roundTrips(t *testing.T) {
	k := DeliveryKey("queue", "jobs", 42, "m1")
	if k != "/queue/jobs/42/m1" {
		t.Fatalf("got %q", k)
	}
	got := ParseKey(k)
	if got.Kind != KindDelivery || got.Seq != 42 || got.Tail != "m1" || got.Queue != "jobs" {
		t.Fatalf("parse of %q: %+v", k, got)
	}
	if RecordKey("jobs") != "/q/jobs" || DeadLetterKey("jobs", 3) != "/q/jobs/dlq/3" {
		t.Fatal("record or dead-letter key")
	}
}

// FuzzParseKey checks that parsing never panics, that a key outside the
// namespace is never claimed, and that produce, consumer and delivery keys
// rebuild to the key parsed.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"/q/a/p/b", "/queue/a/consumer/u", "/q/a/1/b", "/q/a/c/u/2/b", "/q/a/dlq/1", "/x", "/q//p/b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		k := ParseKey(key)
		inNamespace := len(key) > 3 && (key[:3] == "/q/" || len(key) > 7 && key[:7] == "/queue/")
		if k.Kind != KindNone && !inNamespace {
			t.Fatalf("%q parsed as %v outside the namespace", key, k.Kind)
		}
		if k.Kind == KindDelivery && k.Consumer == "" {
			if got := DeliveryKey(k.Prefix, k.Queue, k.Seq, k.Tail); got != key {
				t.Fatalf("delivery %q rebuilt as %q", key, got)
			}
		}
		if k.Kind == KindProduce {
			p := ParseKey("/" + k.Prefix + "/" + k.Queue + "/p/" + k.Tail)
			if p.Kind != KindProduce || p.Tail != k.Tail {
				t.Fatalf("produce %q: rebuilt key parses as %+v", key, p)
			}
		}
	})
}

// TestManager_Route routes each kind of key, without allocating: kv asks
// for every key of every request.
func TestManager_Route(t *testing.T) {
	m, err := New(Config{MemberID: 1})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		key  string
		want kv.Route
	}{
		{"/q/ch:events/p/k1", kv.RouteProduce},
		{"/queue/jobs/producer/k1", kv.RouteProduce},
		{"/q/jobs/c/c1", kv.RouteConsumer},
		{"/q/jobs/c/c1/7/k1", kv.RouteDelivery},
		{"/q/jobs", kv.RouteChecked},
		{SettingsKey("jobs"), kv.RouteChecked},
		{"/q/jobs/x/y/z", kv.RouteInvalid},
		{"plain", kv.RouteKV},
	}
	for _, tt := range tests {
		key := []byte(tt.key)
		if got := m.Route(key); got != tt.want {
			t.Errorf("Route(%q): got %v, want %v", tt.key, got, tt.want)
		}
		if n := testing.AllocsPerRun(100, func() { m.Route(key) }); n != 0 {
			t.Errorf("Route(%q): got %v allocations, want 0", tt.key, n)
		}
	}
}

// TestSameProducer_matchesParseKey checks Produce's shortcut for a put
// to the queue of the put before: where sameProducer takes a key, ParseKey
// parses it to the earlier key's Key with the new tail; where it does
// not, ParseKey is left to say what the key is.
func TestSameProducer_matchesParseKey(t *testing.T) {
	firsts := []string{"/q/ch:events/p/1", "/queue/jobs/producer/abc", "/q//p/x", "/q/a/p/b"}
	nexts := []string{"2", "abc", "", "a/b", "/", "x/", "ü", "1 2"}
	for _, first := range firsts {
		k := ParseKey(first)
		if k.Kind != KindProduce {
			t.Fatalf("ParseKey(%q): kind %v, want produce", first, k.Kind)
		}
		prefix := first[:len(first)-len(k.Tail)]
		for _, tail := range nexts {
			key := prefix + tail
			got, ok := sameProducer(key, prefix)
			want := ParseKey(key)
			if !ok {
				if want.Kind == KindProduce && want.Queue == k.Queue && want.Prefix == k.Prefix {
					t.Errorf("sameProducer(%q, %q) refused a key ParseKey reads as the same queue's: %+v", key, prefix, want)
				}
				continue
			}
			k.Tail = got
			if want != k {
				t.Errorf("sameProducer(%q, %q): got %+v, want ParseKey's %+v", key, prefix, k, want)
			}
		}
		if _, ok := sameProducer(first, ""); ok {
			t.Errorf("sameProducer(%q, \"\"): got true, want false with no key before", first)
		}
	}
}
