//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// configErrorTimeout bounds how long chute may take to refuse a
// configuration: it reads flags and files and resolves nothing.
const configErrorTimeout = 5 * time.Second

// TestConfigErrors_exitBeforeListening runs chute with one configuration
// error at a time and requires exit status 2 with a message naming the
// flag (or environment variable) at fault, before chute opens any
// listener.
//
// "Before any listener" is proved by holding, in the test, every port
// chute would listen on: etcd API, peer link, gossip and metrics. Had
// chute tried to listen before finding the error, that first listen would
// have failed with "address already in use" and chute would have exited 1
// with a listener error. Exit 2 with the configuration message, and no
// listener error in its output, means the error was found before the
// first listen. Probing ports while chute runs could not show this: a
// listener may open and close between two probes.
func TestConfigErrors_exitBeforeListening(t *testing.T) {
	held := map[string]string{}
	for _, name := range []string{"client", "peer", "gossip", "metrics"} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ln.Close() })
		held[name] = ln.Addr().String()
	}
	base := []string{
		"--name", "config-errors",
		"--listen-client-urls", "http://" + held["client"],
		"--listen-peer-urls", "http://" + held["peer"],
		"--gossip-listen", held["gossip"],
		"--metrics-listen", held["metrics"],
	}

	tests := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"clickhouse url port 0", []string{"--clickhouse-url", "http://127.0.0.1:0"}, nil, "--clickhouse-url: "},
		{"clickhouse url bad scheme", []string{"--clickhouse-url", "tcp://127.0.0.1:9000"}, nil, "--clickhouse-url: "},
		{"gossip listen port 0", []string{"--gossip-listen", "127.0.0.1:0"}, nil, "--gossip-listen: "},
		{"gossip listen without port", []string{"--gossip-listen", "127.0.0.1"}, nil, "--gossip-listen: "},
		{"gossip advertise without host", []string{"--gossip-advertise", ":7946"}, nil, "--gossip-advertise: "},
		{"join seed port 0", []string{"--join", "127.0.0.1:0"}, nil, "--join: "},
		{"gossip key of 8 bytes", []string{"--gossip-key", "AAAAAAAAAAA="}, nil, "--gossip-key: "},
		{"https client url without certificate", []string{"--listen-client-urls", "https://" + held["client"]}, nil, "--listen-client-urls: "},
		{"https peer url without peer certificate", []string{"--listen-peer-urls", "https://" + held["peer"]}, nil, "--listen-peer-urls: "},
		{"peer urls mixing http and https", []string{"--listen-peer-urls", "https://" + held["peer"] + ",http://127.0.0.1:1", "--peer-auto-tls"}, nil, "--listen-peer-urls: "},
		{"certificate without key", []string{"--listen-client-urls", "https://" + held["client"], "--cert-file", "/nonexistent/cert.pem"}, nil, "--cert-file: "},
		{"client-cert-auth without CA", []string{"--listen-client-urls", "https://" + held["client"], "--auto-tls", "--client-cert-auth"}, nil, "--client-cert-auth: "},
		{"advertise client url port 0", []string{"--advertise-client-urls", "http://127.0.0.1:0"}, nil, "--advertise-client-urls: "},
		{"listen client url with path", []string{"--listen-client-urls", "http://" + held["client"] + "/v3"}, nil, "--listen-client-urls: "},
		{"negative max-txn-ops", []string{"--max-txn-ops", "-1"}, nil, "--max-txn-ops: "},
		{"otlp endpoint port 0", nil, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:0"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), configErrorTimeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, chuteBin, append(append([]string(nil), base...), tc.args...)...)
			// Nothing from the test's environment: no CHUTE_* or OTEL_*.
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, tc.env...)
			var stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stderr, &stderr
			err := cmd.Run()
			if ctx.Err() != nil {
				t.Fatalf("chute still ran after %v; output %q", configErrorTimeout, stderr.String())
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Fatalf("got %v, want exit status 2; output %q", err, stderr.String())
			}
			out := stderr.String()
			if !strings.Contains(out, tc.want) {
				t.Errorf("got output %q, want it to name %q", out, tc.want)
			}
			for _, listening := range []string{"address already in use", "gossip bound", "serving", "start serf", "metrics listener"} {
				if strings.Contains(out, listening) {
					t.Errorf("got output %q, which mentions %q: chute reached a listener", out, listening)
				}
			}
		})
	}

	// The same base with nothing wrong does reach the listeners, and
	// fails there: the held ports do catch a listen.
	t.Run("valid configuration reaches a listener", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*configErrorTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, chuteBin, base...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if ctx.Err() != nil || !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Fatalf("got %v, want exit status 1 from a held port; output %q", err, out)
		}
		if !strings.Contains(string(out), "address already in use") {
			t.Fatalf("got output %q, want a listener error", out)
		}
	})
}
