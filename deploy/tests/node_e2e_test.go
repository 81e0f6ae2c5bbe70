//go:build e2e

package tests

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"chute/internal/testutil"
)

// Bounds of the waits on the binary; each is polled.
const (
	readyTimeout = 20 * time.Second
	stopTimeout  = 15 * time.Second
	pollInterval = 50 * time.Millisecond
)

// repoRoot is the repository's root, where chute's go.mod is.
const repoRoot = "../.."

// chuteBinary builds chute from the repository root once per test binary.
var chuteBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "chute-deploy-tests-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "chute")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/chute")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/chute: %v\n%s", err, out)
	}
	return bin, nil
})

func buildChute(t testing.TB) string {
	t.Helper()
	bin, err := chuteBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// afterTests removes the binary chuteBinary built (TestMain).
func afterTests() {
	if bin, err := chuteBinary(); err == nil {
		_ = os.RemoveAll(filepath.Dir(bin))
	}
}

// freeAddr returns 127.0.0.1:port with the port free for TCP and UDP a
// moment ago (gossip binds both), and not handed out before in this
// test binary: a node's four ports never collide.
func freeAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(testutil.FreePortOn(t, "127.0.0.1", true)))
}

// node is a chute process started by startNode.
type node struct {
	clientAddr, metricsAddr string
	log                     *testutil.Buffer
}

// startNode starts the binary alone on free loopback ports, with a
// temporary data dir and working directory and extra arguments, waits for
// /readyz and stops it with SIGTERM when the test ends.
func startNode(t *testing.T, bin string, extra ...string) node {
	t.Helper()
	n := node{clientAddr: freeAddr(t), metricsAddr: freeAddr(t), log: &testutil.Buffer{}}
	peer, gossip := freeAddr(t), freeAddr(t)
	args := append([]string{"--name=deploy-tests",
		"--listen-client-urls=http://" + n.clientAddr, "--listen-peer-urls=http://" + peer,
		"--gossip-listen=" + gossip, "--metrics-listen=" + n.metricsAddr, "--gossip-profile=fast",
		"--data-dir=" + t.TempDir()}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "OTEL_TRACES_SAMPLER=always_off")
	cmd.Dir = t.TempDir()
	cmd.Stdout, cmd.Stderr = n.log, n.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// exited is closed once chute exited, waitErr then says how: both
	// the wait for readiness and the cleanup may see it (a channel of
	// the error, received by the first, left the cleanup waiting for
	// good after chute exited before it was ready).
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(stopTimeout):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("chute did not exit within %v of SIGTERM", stopTimeout)
		}
		if t.Failed() {
			t.Logf("chute's log:\n%s", n.log.String())
		}
	})
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(readyTimeout)
	for {
		resp, err := hc.Get("http://" + n.metricsAddr + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return n
			}
		}
		select {
		case <-exited:
			t.Fatalf("chute exited before it was ready (%v):\n%s", waitErr, n.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("chute not ready within %v:\n%s", readyTimeout, n.log.String())
		}
		time.Sleep(pollInterval)
	}
}
