//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
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
			if got := procGodebug(t, p.pid()); !slices.Equal(got, []string{tc.want}) {
				t.Fatalf("chute (pid %d, started with %q) runs with %q, want %q", p.pid(), tc.env, got, tc.want)
			}
		})
	}
}

// TestSysmon_statusRunsAsItIs: `chute status`, which prints and exits,
// does not start again: its environment is the one it was given, and
// nothing of the runtime's trace can reach its stderr.
func TestSysmon_statusRunsAsItIs(t *testing.T) {
	p := StartChute(t)
	ctx, cancel := context.WithTimeout(context.Background(), ctlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, chuteBin, "status", "--endpoints", p.MetricsAddr, "--watch", "--interval", "1s")
	cmd.Env = append(os.Environ(), "GODEBUG=")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = cmd.Wait()
	}()
	// Its first line is printed after main has passed where a node
	// starts again.
	if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
		t.Fatalf("chute status --watch printed nothing: %v", err)
	}
	if got := procGodebug(t, cmd.Process.Pid); !slices.Equal(got, []string{"GODEBUG="}) {
		t.Fatalf("chute status runs with %q, want GODEBUG= as given", got)
	}
}

// procGodebug is the GODEBUG entries of process pid's environment, as
// its last execve set it.
func procGodebug(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(strings.Split(string(b), "\x00"), func(kv string) bool { return !strings.HasPrefix(kv, "GODEBUG=") })
}
