package sysmon

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		environ []string
		want    []string
		changed bool
	}{
		{"no GODEBUG", []string{"A=1", "B=2"}, []string{"A=1", "B=2", "GODEBUG=" + Setting}, true},
		{"empty GODEBUG", []string{"GODEBUG=", "A=1"}, []string{"A=1", "GODEBUG=" + Setting}, true},
		{"other settings kept first", []string{"GODEBUG=madvdontneed=1,gctrace=1", "A=1"},
			[]string{"A=1", "GODEBUG=madvdontneed=1,gctrace=1," + Setting}, true},
		{"the first of two, as the runtime reads", []string{"GODEBUG=gctrace=1", "GODEBUG=schedtrace=5"},
			[]string{"GODEBUG=gctrace=1," + Setting}, true},
		{"schedtrace of the operator's", []string{"A=1", "GODEBUG=gctrace=1,schedtrace=1000"},
			[]string{"A=1", "GODEBUG=gctrace=1,schedtrace=1000"}, false},
		{"schedtrace=0 turns it off", []string{"GODEBUG=schedtrace=0"}, []string{"GODEBUG=schedtrace=0"}, false},
		{"ours already", []string{"GODEBUG=" + Setting}, []string{"GODEBUG=" + Setting}, false},
		{"a name that only starts alike", []string{"GODEBUG=schedtracer=1"},
			[]string{"GODEBUG=schedtracer=1," + Setting}, true},
	} {
		got, changed := Env(tc.environ)
		if !slices.Equal(got, tc.want) || changed != tc.changed {
			t.Errorf("%s: Env(%q) = %q, %v; want %q, %v", tc.name, tc.environ, got, changed, tc.want, tc.changed)
		}
	}
}

// childEnv makes the test binary a child of these tests (runChild):
// "exec" reports its pid and GODEBUG, calls Exec, and reports again if
// Exec returns; "idle" reports its threads' voluntary context switches
// over childIdle of doing nothing.
const childEnv = "SYSMON_TEST_CHILD"

// childIdle is how long the idle child does nothing.
const childIdle = time.Second

func runChild(mode string) int {
	switch mode {
	case "exec":
		fmt.Printf("start %d %s\n", os.Getpid(), os.Getenv("GODEBUG"))
		if err := Exec(os.Args); err != nil {
			fmt.Printf("error %v\n", err)
			return 1
		}
		fmt.Println("done")
		return 0
	case "idle":
		time.Sleep(100 * time.Millisecond) // past the start's own activity
		before, err := switches()
		if err != nil {
			fmt.Println(err)
			return 1
		}
		time.Sleep(childIdle)
		after, err := switches()
		if err != nil {
			fmt.Println(err)
			return 1
		}
		fmt.Println(after - before)
		return 0
	}
	fmt.Printf("unknown child mode %q\n", mode)
	return 2
}

// switches sums the voluntary context switches of the process's
// threads: each wakeup of a sleeping thread is one.
func switches() (int, error) {
	tasks, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("no threads under /proc/self/task: %v", err)
	}
	sum := 0
	for _, task := range tasks {
		b, err := os.ReadFile(task)
		if err != nil {
			continue // a thread that just ended
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:"); ok {
				n, err := strconv.Atoi(strings.TrimSpace(v))
				if err != nil {
					return 0, fmt.Errorf("%s: %q: %v", task, line, err)
				}
				sum += n
			}
		}
	}
	return sum, nil
}

// child runs the test binary as a child in mode, with environ (GODEBUG
// left out unless godebug is set, then GODEBUG=godebug), and returns
// its output lines.
func child(t *testing.T, mode string, godebug *string) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GODEBUG=") && !strings.HasPrefix(kv, childEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, childEnv+"="+mode)
	if godebug != nil {
		cmd.Env = append(cmd.Env, "GODEBUG="+*godebug)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child %s: %v; output:\n%s", mode, err, out)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// TestExec_startsAgainWithSetting: a process without the setting starts
// again as the same process (its pid) with it, and then goes on; one
// whose GODEBUG sets schedtrace goes on as it is.
func TestExec_startsAgainWithSetting(t *testing.T) {
	lines := child(t, "exec", nil)
	if len(lines) != 3 || lines[2] != "done" {
		t.Fatalf("child output %q, want two start lines and done", lines)
	}
	first, second := strings.Fields(lines[0]), strings.Fields(lines[1])
	if len(first) != 2 || first[0] != "start" {
		t.Fatalf("first line %q, want start and the pid, no GODEBUG", lines[0])
	}
	if len(second) != 3 || second[0] != "start" || second[1] != first[1] || second[2] != Setting {
		t.Fatalf("second line %q, want start, pid %s and GODEBUG %s", lines[1], first[1], Setting)
	}

	off := "schedtrace=0"
	lines = child(t, "exec", &off)
	if len(lines) != 2 || !strings.HasSuffix(lines[0], " "+off) || lines[1] != "done" {
		t.Fatalf("child output with GODEBUG=%s: %q, want one start line with it and done", off, lines)
	}
}
