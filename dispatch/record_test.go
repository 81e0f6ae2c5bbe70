package dispatch

import "testing"

func TestParseRecord(t *testing.T) {
	tests := []struct {
		in   string
		want Record
		ok   bool
	}{
		{"7", Record{Member: 7}, true},
		{"42;epoch=3;reply_to=/q/rpc-reply-a;pinned", Record{Member: 42, Epoch: 3, ReplyTo: "/q/rpc-reply-a", Pinned: true}, true},
		{"9;weight=3;pinned;future=yes", Record{Member: 9, Pinned: true}, true},
		{"9;epoch=4;from=7", Record{Member: 9, Epoch: 4, From: 7}, true},
		{"9;epoch=4;from=x", Record{Member: 9, Epoch: 4}, true},
		{"", Record{}, false},
		{"  ", Record{}, false},
		{"abc", Record{}, false},
		{";", Record{}, false},
		{"reply_to=/q/x", Record{}, false},
		{"-1", Record{}, false},
		{"1.5", Record{}, false},
		{"0", Record{}, false},
		{"0;pinned", Record{}, false},
	}
	for _, tt := range tests {
		got, ok := ParseRecord(tt.in)
		if ok != tt.ok || got != tt.want {
			t.Errorf("ParseRecord(%q): got %+v %v, want %+v %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
	r := Record{Member: 42, Epoch: 7, ReplyTo: "/q/x", Pinned: true}
	if got, ok := ParseRecord(r.String()); !ok || got != r {
		t.Fatalf("round trip of %q: got %+v", r.String(), got)
	}
	if r.String() != "42;epoch=7;reply_to=/q/x;pinned" {
		t.Fatalf("render: got %q", r.String())
	}
	moved := r.movedTo(9, 8)
	if want := (Record{Member: 9, Epoch: 8, ReplyTo: "/q/x", Pinned: true, From: 42}); moved != want {
		t.Fatalf("moved: got %+v, want %+v", moved, want)
	}
	if got, ok := ParseRecord(moved.String()); !ok || got != moved || moved.String() != "9;epoch=8;reply_to=/q/x;pinned;from=42" {
		t.Fatalf("round trip of %q: got %+v", moved.String(), got)
	}
	if again := moved.movedTo(9, 9); again.From != 42 {
		t.Fatalf("claimed again by its own member: from %d, want 42 still", again.From)
	}
}
