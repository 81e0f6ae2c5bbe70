package bench

import (
	"os"
	"runtime"
	"testing"
	"time"
)

func TestReadRSS_self(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/<pid>/status is Linux's")
	}
	rss, err := ReadRSS(os.Getpid())
	if err != nil || rss < 1<<20 {
		t.Errorf("ReadRSS(self): got %d, %v; want at least 1 MiB", rss, err)
	}
	if _, err := ReadRSS(1 << 30); err == nil {
		t.Errorf("ReadRSS(no such process): got nil error")
	}
}

func TestSampleRSS_peak(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/<pid>/status is Linux's")
	}
	s := sampleRSS([]proc{{name: "self", pid: os.Getpid()}, {name: "gone", pid: 1 << 30}}, time.Millisecond)
	ballast := make([]byte, 64<<20)
	for i := range ballast {
		ballast[i] = 1 // resident now
	}
	time.Sleep(20 * time.Millisecond)
	got := s.stop()
	runtime.KeepAlive(ballast)
	if len(got) != 1 || got[0].Node != "self" || got[0].Bytes < 64<<20 {
		t.Errorf("peaks: got %+v, want self at 64 MiB or more and nothing of the gone process", got)
	}
	if again := s.stop(); len(again) != 1 {
		t.Errorf("second stop: got %+v", again)
	}
}
