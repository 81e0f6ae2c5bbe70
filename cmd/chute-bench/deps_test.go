package main

import (
	"os/exec"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestChute_linksNoBenchmark keeps the benchmark's client side out of the
// server: chute must not depend on the bench package, the etcd client or
// zap, which only the benchmark and the tests need.
func TestChute_linksNoBenchmark(t *testing.T) {
	deps := goListDeps(t, "chute/cmd/chute")
	if len(deps) < 50 {
		t.Fatalf("go list -deps chute/cmd/chute: got %d packages, want the server's (hundreds)", len(deps))
	}
	for _, dep := range deps {
		for _, banned := range []string{"chute/internal/bench", "go.etcd.io/etcd/client/v3", "go.uber.org/zap"} {
			if dep == banned || strings.HasPrefix(dep, banned+"/") {
				t.Errorf("chute depends on %s", dep)
			}
		}
	}
}

// TestChuteBench_linksBenchmark guards the test above against a go list
// that answers nothing useful: the same query for chute-bench finds them.
func TestChuteBench_linksBenchmark(t *testing.T) {
	deps := goListDeps(t, "chute/cmd/chute-bench")
	for _, want := range []string{"chute/internal/bench", "go.etcd.io/etcd/client/v3"} {
		found := false
		for _, dep := range deps {
			found = found || dep == want
		}
		if !found {
			t.Errorf("go list -deps chute/cmd/chute-bench lacks %s", want)
		}
	}
}

// goListDeps is `go list -deps pkg`, the packages pkg links, standard
// library included. go test puts its own go first on PATH.
func goListDeps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr)
	}
	return strings.Fields(string(out))
}
