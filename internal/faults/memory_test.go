package faults

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestRSS(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc: RSS reads Linux's /proc")
	}
	rss, err := RSS(os.Getpid())
	if err != nil || rss < 1<<20 || rss > 1<<40 {
		t.Errorf("RSS of the test process: got %d, %v; want a size in bytes", rss, err)
	}
	cmd := exec.Command("sleep", "0")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := RSS(cmd.Process.Pid); err == nil {
		t.Error("RSS of a process that exited: got nil error")
	}
}

func TestSampleRSS(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc: RSS reads Linux's /proc")
	}
	s := SampleRSS(os.Getpid(), time.Millisecond)
	time.Sleep(20 * time.Millisecond) // a few samples
	rss, n, err := s.Stop()
	if err != nil || rss < 1<<20 || n < 2 {
		t.Errorf("Stop: got %d bytes from %d samples, %v", rss, n, err)
	}
	if again, _, _ := s.Stop(); again != rss {
		t.Errorf("a second Stop: got %d, want %d", again, rss)
	}

	gone := SampleRSS(1<<30, time.Millisecond) // no such pid
	if _, n, err := gone.Stop(); err == nil || n != 0 {
		t.Errorf("sampling a missing process: got %d samples, %v; want an error", n, err)
	}
}
