//go:build e2e

package e2e

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"chute/internal/sysmon"
)

// TestSysmon_nodeRunsWithSetting: the chute binary starts again, as the
// same process, with the runtime's monitor kept out of its deep sleep
// (GODEBUG's schedtrace, see internal/sysmon), and leaves an operator's
// own schedtrace, and the rest of GODEBUG, as they are.
func TestSysmon_nodeRunsWithSetting(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"no GODEBUG settings", []string{"GODEBUG="}, "GODEBUG=" + sysmon.Setting},
		{"GODEBUG of other settings", []string{"GODEBUG=madvdontneed=1"}, "GODEBUG=madvdontneed=1," + sysmon.Setting},
		{"schedtrace=0 turns it off", []string{"GODEBUG=schedtrace=0"}, "GODEBUG=schedtrace=0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := StartChuteEnv(t, tc.env)
			b, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid()) + "/environ")
			if err != nil {
				t.Fatal(err)
			}
			environ := strings.Split(string(b), "\x00")
			godebug := slices.DeleteFunc(slices.Clone(environ), func(kv string) bool { return !strings.HasPrefix(kv, "GODEBUG=") })
			if len(godebug) != 1 || godebug[0] != tc.want {
				t.Fatalf("chute (pid %d, started with %q) runs with %q, want %q", p.pid(), tc.env, godebug, tc.want)
			}
		})
	}
}
