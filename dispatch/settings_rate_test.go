package dispatch

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestManager_Check_insertRateSettings: max_inserts_per_second (a JSON
// number, fractions allowed) and max_inflight_inserts (1 to 16) are
// stored when in range and refused when put out of range or of the wrong
// type, with etcd's InvalidArgument naming the setting; absent, they are
// the member's defaults (2 and 2).
func TestManager_Check_insertRateSettings(t *testing.T) {
	n := startNode(t, nil)
	cli := n.client(t)
	ctx := testCtx(t, 10*time.Second)
	if got := n.mgr.settingsOf("ch:x"); got.MaxInsertsPerSecond != 2 || got.MaxInflightInserts != 2 {
		t.Errorf("defaults: got max_inserts_per_second %v, max_inflight_inserts %d, want 2 and 2", got.MaxInsertsPerSecond, got.MaxInflightInserts)
	}
	for _, tt := range []struct{ value, want string }{
		{`{"max_inserts_per_second":0}`, "max_inserts_per_second 0: want 0.001 to 10000"},
		{`{"max_inserts_per_second":-1}`, "max_inserts_per_second -1: want"},
		{`{"max_inserts_per_second":20000}`, "max_inserts_per_second 20000: want"},
		{`{"max_inserts_per_second":"2"}`, "max_inserts_per_second"},
		{`{"max_inflight_inserts":0}`, "max_inflight_inserts 0: want 1 to 16"},
		{`{"max_inflight_inserts":17}`, "max_inflight_inserts 17: want 1 to 16"},
		{`{"max_inflight_inserts":1.5}`, "max_inflight_inserts"},
	} {
		_, err := cli.Put(ctx, SettingsKey("ch:x"), tt.value)
		want := "etcdserver: /config/queues/ch:x: settings: "
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("put %s: got %v, want InvalidArgument containing %q and %q", tt.value, err, want, tt.want)
		}
	}
	if _, err := cli.Put(ctx, SettingsKey("ch:x"), `{"max_inserts_per_second":0.5,"max_inflight_inserts":16}`); err != nil {
		t.Fatalf("good settings: got %v, want them stored", err)
	}
	s := n.mgr.settingsOf("ch:x")
	if s.MaxInsertsPerSecond != 0.5 || s.MaxInflightInserts != 16 || s.insertGap() != 2*time.Second {
		t.Errorf("got max_inserts_per_second %v (gap %v), max_inflight_inserts %d, want 0.5 (2s) and 16",
			s.MaxInsertsPerSecond, s.insertGap(), s.MaxInflightInserts)
	}
}

// TestConfig_Validate_insertRate: the member's defaults of the two
// settings are held to the same bounds.
func TestConfig_Validate_insertRate(t *testing.T) {
	for _, tt := range []struct {
		c    Config
		want string // "" when valid
	}{
		{Config{MemberID: 1}, ""},
		{Config{MemberID: 1, MaxInsertsPerSecond: 0.25, MaxInflightInserts: 4}, ""},
		{Config{MemberID: 1, MaxInsertsPerSecond: -1}, "MaxInsertsPerSecond"},
		{Config{MemberID: 1, MaxInsertsPerSecond: 1e9}, "MaxInsertsPerSecond"},
		{Config{MemberID: 1, MaxInflightInserts: 17}, "MaxInflightInserts"},
		{Config{MemberID: 1, MaxInflightInserts: -1}, "MaxInflightInserts"},
	} {
		err := tt.c.Validate()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("Validate(%+v): got %v, want an error naming %q", tt.c, err, tt.want)
		}
	}
}
