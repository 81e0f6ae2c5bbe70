package dispatch

import "testing"

func TestRecent_remembersTheLastLimitKeys(t *testing.T) {
	const limit = 100
	r := newRecent[int, int](limit)
	for k := range 1000 {
		r.add(k, -k)
		// The last limit keys are always there, with their values.
		for back := 0; back < limit && back <= k; back++ {
			if v, ok := r.get(k - back); !ok || v != back-k {
				t.Fatalf("after adding %d: get(%d) = %d, %v; want %d, true", k, k-back, v, ok, back-k)
			}
		}
		// At most twice the limit.
		if n := len(r.cur) + len(r.prev); n > 2*limit {
			t.Fatalf("after adding %d: %d keys kept, want at most %d", k, n, 2*limit)
		}
	}
	if _, ok := r.get(1000 - 2*limit - 1); ok {
		t.Errorf("a key added more than twice the limit ago is still there")
	}
	r.forget(999)
	r.forget(900)
	if _, ok := r.get(999); ok {
		t.Errorf("forget(999): still there")
	}
	if _, ok := r.get(900); ok {
		t.Errorf("forget(900): still there")
	}
}
