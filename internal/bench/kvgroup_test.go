package bench

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestEtcdCommand(t *testing.T) {
	got := strings.Join(etcdCommand("etcd-2", "/d/etcd-2.etcd", 3, 4, "a=http://127.0.0.1:2,etcd-2=http://127.0.0.1:4"), " ")
	want := "--name etcd-2 --data-dir /d/etcd-2.etcd" +
		" --listen-client-urls http://127.0.0.1:3 --advertise-client-urls http://127.0.0.1:3" +
		" --listen-peer-urls http://127.0.0.1:4 --initial-advertise-peer-urls http://127.0.0.1:4" +
		" --initial-cluster a=http://127.0.0.1:2,etcd-2=http://127.0.0.1:4" +
		" --initial-cluster-state new --initial-cluster-token chute-bench --logger zap --log-level warn"
	if got != want {
		t.Errorf("etcdCommand:\ngot  %q\nwant %q", got, want)
	}
	if strings.Contains(got, "unsafe-no-fsync") {
		t.Errorf("etcdCommand: got %q, want etcd to fsync as chute does", got)
	}
}

func TestEtcdTargets(t *testing.T) {
	members := etcdTargets("/usr/bin/etcd", []int{11, 12, 21, 22, 31, 32}, "/d", []string{"HOME=/h", "OTEL_X=y"})
	if len(members) != 3 {
		t.Fatalf("members: got %d, want 3", len(members))
	}
	initial := "etcd-1=http://127.0.0.1:12,etcd-2=http://127.0.0.1:22,etcd-3=http://127.0.0.1:32"
	for i, m := range members {
		name := fmt.Sprintf("etcd-%d", i+1)
		client, peer := 10*(i+1)+1, 10*(i+1)+2
		want := strings.Join(etcdCommand(name, "/d/"+name+".etcd", client, peer, initial), " ")
		if got := strings.Join(m.argv, " "); got != want {
			t.Errorf("member %d argv:\ngot  %q\nwant %q", i+1, got, want)
		}
		if m.name != name || m.exe != "/usr/bin/etcd" || m.endpoint != fmt.Sprintf("http://127.0.0.1:%d", client) || m.metrics != "" {
			t.Errorf("member %d: got %s (%s) at %s, metrics %q", i+1, m.name, m.exe, m.endpoint, m.metrics)
		}
		if e := strings.Join(m.env, " "); e != "HOME=/h" {
			t.Errorf("member %d env: got %q, want HOME=/h", i+1, e)
		}
	}
}

func TestParseEtcdVersion(t *testing.T) {
	out := "etcd Version: 3.4.23\nGit SHA: Not provided\nGo Version: go1.19.8\n"
	if got := parseEtcdVersion([]byte(out)); got != "3.4.23" {
		t.Errorf("parseEtcdVersion: got %q, want 3.4.23", got)
	}
	if got := parseEtcdVersion([]byte("chute 1.0\n")); got != "" {
		t.Errorf("parseEtcdVersion of another program: got %q, want empty", got)
	}
}

func TestEtcdBinary(t *testing.T) {
	errMissing := errors.New("missing")
	lookPath := func(name string) (string, error) {
		if name == "etcd" {
			return "/usr/bin/etcd", nil
		}
		return "", errMissing
	}
	tests := []struct {
		name, clickhouse, etcd, want string
		err                          bool
	}{
		{"plain matrix", "", "etcd", "", false},
		{"on PATH", "http://ch", "etcd", "/usr/bin/etcd", false},
		{"none", "http://ch", "none", "", false},
		{"missing", "http://ch", "etcd-nope", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := etcdBinary(options{clickhouseURL: tt.clickhouse, etcd: tt.etcd}, lookPath)
			if got != tt.want || (err != nil) != tt.err || (err != nil && !errors.Is(err, errMissing)) {
				t.Errorf("etcdBinary: got %q, %v; want %q, error %v", got, err, tt.want, tt.err)
			}
		})
	}
}

// TestRunKVGroup runs the KV group with fake chute nodes and fake etcd
// members, twice each: one median per side, three endpoints in each
// client's list, every process's memory and CPU measured, and no data
// directory left behind.
func TestRunKVGroup(t *testing.T) {
	mc := testMatrix(t)
	mc.etcd = mc.chute
	mc.repeat = 2
	dir := t.TempDir()
	var results []Result
	var order []string // the servers of the runs, in run order
	run := func(c cell) (Result, error) {
		order = append(order, c.server)
		return runCell(testContext(t), c, slog.New(slog.DiscardHandler))
	}
	add := func(r Result) { results = append(results, r) }
	if err := runKVGroup(testContext(t), mc, dir, run, add, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("runKVGroup: %v", err)
	}
	want := []struct {
		server string
		nodes  int
		procs  string
	}{
		{ServerChuteKV3, 3, "bench-1 bench-2 bench-3"},
		{ServerEtcd3, 0, "etcd-1 etcd-2 etcd-3"},
	}
	alternate := []string{ServerChuteKV3, ServerEtcd3, ServerChuteKV3, ServerEtcd3}
	if !slices.Equal(order, alternate) {
		t.Errorf("runs: got %q, want them alternating: %q", order, alternate)
	}
	if len(results) != len(want) {
		t.Fatalf("results: got %d, want %d: %+v", len(results), len(want), results)
	}
	for i, w := range want {
		r := results[i]
		if r.Server != w.server || r.Nodes != w.nodes || r.Txn != 0 || r.Queues != 0 || r.Puts != 300 || r.Errors != 0 {
			t.Errorf("result %d: got %s, %d nodes, txn %d, %d queues, %d puts, %d errors; want %s, %d nodes, unary plain keys, 300 puts",
				i, r.Server, r.Nodes, r.Txn, r.Queues, r.Puts, r.Errors, w.server, w.nodes)
		}
		if r.Spread == nil || r.Spread.Runs != 2 {
			t.Errorf("result %d: got spread %+v, want 2 runs", i, r.Spread)
		}
		var rss, cpu []string
		for _, p := range r.PeakRSS {
			rss = append(rss, p.Node)
		}
		for _, c := range r.CPU {
			cpu = append(cpu, c.Node)
		}
		if strings.Join(rss, " ") != w.procs || strings.Join(cpu, " ") != w.procs {
			t.Errorf("result %d: got RSS of %q and CPU of %q, want %q", i, rss, cpu, w.procs)
		}
	}
	left, err := filepath.Glob(filepath.Join(dir, "kv-*"))
	if err != nil || len(left) > 0 {
		t.Errorf("data directories left: %v (%v)", left, err)
	}
	if ts := evaluateTargets(results, nil, nil); len(ts) != 0 {
		t.Errorf("targets: got %+v, want none: the KV cells are no target's", ts)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("the matrix directory: %v", err)
	}
}

func TestReport_WriteMarkdown_kvRatio(t *testing.T) {
	for _, tt := range []struct {
		chute, etcd float64
		want        string
	}{{5000, 4000, "1.25 (125%)"}, {3000, 4000, "0.75 (75%)"}} {
		results := []Result{
			{Server: ServerChuteKV3, Clients: 100, PutsPerSec: tt.chute},
			{Server: ServerEtcd3, Clients: 100, PutsPerSec: tt.etcd},
		}
		var b strings.Builder
		if err := NewReport(Measured{Results: results}).WriteMarkdown(&b); err != nil {
			t.Fatal(err)
		}
		if want := "chute KV/etcd puts/s, 3 nodes each: 100 clients " + tt.want; !strings.Contains(b.String(), want) {
			t.Errorf("chute %v, etcd %v: got\n%s\nwant a line %q", tt.chute, tt.etcd, b.String(), want)
		}
	}
}
