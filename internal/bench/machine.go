package bench

import (
	"bufio"
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// Machine describes where a benchmark ran. Fields the bench could not
// read are empty.
type Machine struct {
	CPUs        int    `json:"cpus"`      // runtime.NumCPU
	CPUModel    string `json:"cpu_model"` // /proc/cpuinfo's first model name
	MemoryBytes int64  `json:"memory_bytes"`
	OS          string `json:"os"`
	Arch        string `json:"arch"`
	Kernel      string `json:"kernel,omitempty"`
	GoVersion   string `json:"go_version"` // of the bench binary
	ClickHouse  string `json:"clickhouse,omitempty"`
	// Etcd is the version of the etcd the KV group ran; empty without.
	Etcd string `json:"etcd,omitempty"`
	// Commit is the VCS revision the bench binary was built from, and
	// Modified whether its tree had local changes (debug.ReadBuildInfo).
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	// LoadAvg is /proc/loadavg's 1, 5 and 15 minute load when the bench
	// started, and LoadAvgEnd when it ended: other work on the machine
	// skews every figure.
	LoadAvg    string    `json:"load_avg,omitempty"`
	LoadAvgEnd string    `json:"load_avg_end,omitempty"`
	Started    time.Time `json:"started"`
}

// describeMachine reads the machine's description; clickhouseURL, when
// set, is asked for its version.
func describeMachine(ctx context.Context, clickhouseURL string) Machine {
	m := Machine{
		CPUs:      runtime.NumCPU(),
		OS:        runtime.GOOS,
		Arch:      runtime.GOARCH,
		GoVersion: runtime.Version(),
		Started:   time.Now().UTC(),
	}
	m.CPUModel = procField("/proc/cpuinfo", "model name")
	if kb, err := strconv.ParseInt(strings.TrimSuffix(procField("/proc/meminfo", "MemTotal"), " kB"), 10, 64); err == nil {
		m.MemoryBytes = kb << 10
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.LoadAvg = loadAvg()
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				m.Commit = s.Value
			case "vcs.modified":
				m.Modified = s.Value == "true"
			}
		}
	}
	if clickhouseURL != "" {
		if v, err := chVersion(ctx, clickhouseURL); err == nil {
			m.ClickHouse = v
		}
	}
	return m
}

// loadAvg returns the 1, 5 and 15 minute load of /proc/loadavg; empty
// where there is none.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	if f := strings.Fields(string(b)); len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return ""
}

// procField returns the value of the first "key: value" line of a /proc
// file whose key is key; empty when there is none.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
