package bench

import (
	"os"
	"runtime"
	"testing"
	"time"
)

func TestSampleRSS_peak(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Fatalf("the sampler reads Linux's /proc; this test runs on Linux only (GOOS %s)", runtime.GOOS)
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
