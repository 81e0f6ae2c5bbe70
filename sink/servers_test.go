package sink

import (
	"testing"
	"time"
)

// fakeNow is a clock a test moves by hand.
type fakeNow struct{ t time.Time }

func (f *fakeNow) now() time.Time          { return f.t }
func (f *fakeNow) advance(d time.Duration) { f.t = f.t.Add(d) }

func threeServers(t *testing.T) (*Servers, *fakeNow) {
	t.Helper()
	clk := &fakeNow{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := NewServers(ServersConfig{DownMin: time.Second, DownMax: 30 * time.Second, Now: clk.now})
	eps, err := ParseURLs("http://a:1,http://b:2,http://c:3")
	if err != nil {
		t.Fatal(err)
	}
	s.Set(eps)
	return s, clk
}

func pickAddr(t *testing.T, s *Servers, tried ...string) string {
	t.Helper()
	ep, wait, ok := s.Pick(tried...)
	if !ok || wait != 0 {
		t.Fatalf("Pick(%v): got %s, wait %v, ok %v, want a server that is up", tried, ep.Addr, wait, ok)
	}
	return ep.Addr
}

var transient = Result{Class: ClassTransient}

func TestServers_Pick_roundRobin(t *testing.T) {
	s, _ := threeServers(t)
	var got []string
	for range 6 {
		got = append(got, pickAddr(t, s))
	}
	want := []string{"a:1", "b:2", "c:3", "a:1", "b:2", "c:3"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("picks: got %v, want %v", got, want)
		}
	}
}

func TestServers_Record_transientMarksDownOthersStayUp(t *testing.T) {
	s, clk := threeServers(t)
	if d := s.Record("b:2", transient); d != time.Second {
		t.Fatalf("first failure: got down %v, want 1s", d)
	}
	for range 4 {
		if got := pickAddr(t, s); got == "b:2" {
			t.Fatalf("picked b:2 while it is down")
		}
	}
	if got := pickAddr(t, s, "a:1"); got != "c:3" {
		t.Fatalf("Pick with a:1 tried: got %s, want c:3", got)
	}
	for _, class := range []Class{ClassData, ClassConfig, ClassOK} {
		if d := s.Record("a:1", Result{Class: class}); d != 0 {
			t.Fatalf("%s answer: got down %v, want 0: the table's error, not the server's", class, d)
		}
	}
	st := s.State()
	if st[1].Up || st[1].Failures != 1 || !st[1].DownUntil.Equal(clk.t.Add(time.Second)) || !st[0].Up {
		t.Fatalf("state: got %+v", st)
	}
	clk.advance(time.Second)
	seen := map[string]bool{}
	for range 3 {
		seen[pickAddr(t, s)] = true
	}
	if !seen["b:2"] {
		t.Fatalf("after its down period: got picks %v, want b:2 among them", seen)
	}
}

// TestServers_Record_queryLimitsKeepTheServerUp: a batch over its query's
// own limits (time, memory "for query") is refused every time it is sent;
// marking the server down for it made every queue wait. The server's
// total memory is the server's: down.
func TestServers_Record_queryLimitsKeepTheServerUp(t *testing.T) {
	s, _ := threeServers(t)
	for _, res := range []Result{
		{Class: ClassTransient, Code: 241, Message: "Code: 241, e.displayText() = DB::Exception: Memory limit (for query) exceeded: would use 9.54 GiB, maximum: 9.31 GiB"},
		{Class: ClassTransient, Code: 159, Message: "Code: 159, e.displayText() = DB::Exception: Timeout exceeded: elapsed 5.0 seconds, maximum: 5"},
	} {
		if d := s.Record("a:1", res); d != 0 || !s.State()[0].Up {
			t.Fatalf("code %d: down %v, state %+v; want the server up", res.Code, d, s.State()[0])
		}
	}
	total := Result{Class: ClassTransient, Code: 241, Message: "Code: 241, e.displayText() = DB::Exception: Memory limit (total) exceeded: would use 30.00 GiB"}
	if d := s.Record("a:1", total); d == 0 {
		t.Fatal("the server's total memory exceeded: got up, want down")
	}
}

func TestServers_Record_backoffDoublesToMaxAndResets(t *testing.T) {
	s, clk := threeServers(t)
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30}
	for i, w := range want {
		if got := s.Record("a:1", transient); got != w*time.Second {
			t.Fatalf("failure %d: got down %v, want %v", i+1, got, w*time.Second)
		}
		if again := s.Record("a:1", transient); again != w*time.Second {
			t.Fatalf("failure %d again while down: got %v, want the same period, not a longer one", i+1, again)
		}
		clk.advance(w * time.Second)
	}
	s.Record("a:1", Result{Class: ClassOK, WireBytes: 10})
	if got := s.Record("a:1", transient); got != time.Second {
		t.Fatalf("after a success: got down %v, want 1s again", got)
	}
	st := s.State()[0]
	if st.Batches["ok"] != 1 || st.Batches["transient"] != 15 || st.WireBytes != 10 || st.Failures != 1 {
		t.Fatalf("counts: got %+v", st)
	}
}

func TestServers_Pick_allDownWaitsForSoonest(t *testing.T) {
	s, clk := threeServers(t)
	s.Record("a:1", transient)
	clk.advance(time.Second)
	s.Record("a:1", transient) // a: 2 s
	s.Record("b:2", transient) // b: 1 s
	clk.advance(100 * time.Millisecond)
	s.Record("c:3", transient) // c: 1 s from now, ends after b
	ep, wait, ok := s.Pick()
	if !ok || ep.Addr != "b:2" || wait != 900*time.Millisecond {
		t.Fatalf("all down: got %s, wait %v, ok %v, want b:2 in 900ms", ep.Addr, wait, ok)
	}
	if _, _, ok := s.Pick("a:1", "b:2", "c:3"); ok {
		t.Fatal("every server tried: got ok, want none left")
	}
	clk.advance(900 * time.Millisecond)
	if got := pickAddr(t, s); got != "b:2" {
		t.Fatalf("after b's down period: got %s, want b:2", got)
	}
}

func TestServers_Set_keepsHealthOfKnownServers(t *testing.T) {
	s, _ := threeServers(t)
	s.Record("c:3", transient)
	eps, _ := ParseURLs("http://u:pw@c:3,http://d:4")
	s.Set(eps)
	st := s.State()
	if len(st) != 2 || st[0].Server != "c:3" || st[0].Up || st[1].Server != "d:4" || !st[1].Up {
		t.Fatalf("state after Set: got %+v", st)
	}
	if ep, _, _ := s.Pick(); ep.Addr != "d:4" {
		t.Fatalf("Pick: got %s, want d:4 (c:3 is down)", ep.Addr)
	}
	ep, _, _ := s.Pick("d:4")
	if ep.User != "u" || ep.Password != "pw" {
		t.Fatalf("endpoint of c:3: got user %q, want the new list's credentials", ep.User)
	}
	if _, _, ok := NewServers(ServersConfig{}).Pick(); ok {
		t.Fatal("no server Set: got ok, want none")
	}
}

func TestServers_Pick_oneServerNeverPassedOver(t *testing.T) {
	clk := &fakeNow{t: time.Unix(0, 0)}
	s := NewServers(ServersConfig{Now: clk.now})
	eps, _ := ParseURLs("http://a:1")
	s.Set(eps)
	if d := s.Record("a:1", transient); d != time.Second {
		t.Fatalf("down: got %v, want 1s", d)
	}
	if got := pickAddr(t, s); got != "a:1" {
		t.Fatalf("got %s, want a:1 at once: the caller's backoff paces it", got)
	}
	if _, _, ok := s.Pick("a:1"); ok {
		t.Fatal("the one server tried: got ok, want none left")
	}
	if st := s.State()[0]; st.Up {
		t.Fatalf("state: got up, want down until %v", clk.t.Add(time.Second))
	}
}
