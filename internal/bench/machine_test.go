package bench

import (
	"runtime"
	"testing"
)

func TestDescribeMachine(t *testing.T) {
	m := describeMachine(testContext(t), "")
	if m.CPUs != runtime.NumCPU() || m.OS != runtime.GOOS || m.Arch != runtime.GOARCH || m.GoVersion != runtime.Version() || m.Started.IsZero() {
		t.Errorf("got %+v, want this process's runtime", m)
	}
	if runtime.GOOS == "linux" && (m.CPUModel == "" || m.MemoryBytes <= 0 || m.Kernel == "" || m.LoadAvg == "") {
		t.Errorf("got %+v, want the model, memory, kernel and load of /proc", m)
	}
	if m.ClickHouse != "" {
		t.Errorf("ClickHouse version without a URL: got %q", m.ClickHouse)
	}
}
