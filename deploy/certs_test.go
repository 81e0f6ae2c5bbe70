//go:build e2e

package deploy_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const genCertsScript = "deploy/compose/gen-certs.sh"

// composeNodeCerts are the node certificates gen-certs.sh makes, by the
// compose service that uses each.
var composeNodeCerts = []string{"chute-1", "chute-2", "chute-3"}

// requireOpenSSL fails the test when openssl is missing: gen-certs.sh
// needs it, and a test that cannot run it must not pass.
func requireOpenSSL(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Fatalf("openssl not found (%v): gen-certs.sh and these checks need it; install openssl", err)
	}
}

// genCerts runs gen-certs.sh into a new directory and returns it.
func genCerts(t testing.TB) string {
	t.Helper()
	requireOpenSSL(t)
	dir := filepath.Join(t.TempDir(), "certs")
	runGenCerts(t, dir)
	return dir
}

func runGenCerts(t testing.TB, dir string) string {
	t.Helper()
	out, err := exec.Command("sh", repoFile(genCertsScript), dir).CombinedOutput()
	if err != nil {
		t.Fatalf("sh %s %s: %v\n%s", genCertsScript, dir, err, out)
	}
	return string(out)
}

// clientTLS is the TLS config of a client that trusts caFile and
// presents certFile with keyFile (none when certFile is "").
func clientTLS(t testing.TB, caFile, certFile, keyFile string) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(mustReadAbs(t, caFile)) {
		t.Fatalf("%s: no certificate", caFile)
	}
	c := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c
}

func mustReadAbs(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parseCert(t testing.TB, path string) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(mustReadAbs(t, path))
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("%s: no PEM certificate", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c
}

// TestGenCerts: gen-certs.sh writes a CA, a server and client certificate
// per compose node with the node's name, localhost and 127.0.0.1, and an
// etcdctl client certificate; openssl verifies each for its purpose; a
// second run changes nothing, and a missing certificate is made again.
func TestGenCerts(t *testing.T) {
	dir := genCerts(t)
	verify := func(purpose, file string) {
		t.Helper()
		out, err := exec.Command("openssl", "verify", "-purpose", purpose, "-CAfile", filepath.Join(dir, "ca.pem"), filepath.Join(dir, file)).CombinedOutput()
		if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), ": OK") {
			t.Errorf("openssl verify -purpose %s %s: %v\n%s", purpose, file, err, out)
		}
	}
	for _, n := range composeNodeCerts {
		verify("sslserver", n+".pem")
		verify("sslclient", n+".pem")
		c := parseCert(t, filepath.Join(dir, n+".pem"))
		for _, name := range []string{n, "localhost"} {
			if !slices.Contains(c.DNSNames, name) {
				t.Errorf("%s.pem: DNS names %v, want %s", n, c.DNSNames, name)
			}
		}
		if !slices.ContainsFunc(c.IPAddresses, func(ip net.IP) bool { return ip.Equal(net.IPv4(127, 0, 0, 1)) }) {
			t.Errorf("%s.pem: IP addresses %v, want 127.0.0.1", n, c.IPAddresses)
		}
		if _, err := tls.LoadX509KeyPair(filepath.Join(dir, n+".pem"), filepath.Join(dir, n+"-key.pem")); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	verify("sslclient", "client.pem")
	if c := parseCert(t, filepath.Join(dir, "client.pem")); !slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
		t.Errorf("client.pem: extended key usages %v, want client auth alone", c.ExtKeyUsage)
	}

	snapshot := func() map[string][]byte {
		files := map[string][]byte{}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			files[e.Name()] = mustReadAbs(t, filepath.Join(dir, e.Name()))
		}
		return files
	}
	before := snapshot()
	if out := runGenCerts(t, dir); out != "" {
		t.Errorf("second run wrote files:\n%s", out)
	}
	after := snapshot()
	if len(after) != len(before) {
		t.Errorf("second run: files %d, want %d", len(after), len(before))
	}
	for name, b := range before {
		if !bytes.Equal(after[name], b) {
			t.Errorf("second run changed %s", name)
		}
	}

	if err := os.Remove(filepath.Join(dir, "chute-2.pem")); err != nil {
		t.Fatal(err)
	}
	runGenCerts(t, dir)
	verify("sslserver", "chute-2.pem")
	if !bytes.Equal(mustReadAbs(t, filepath.Join(dir, "ca.pem")), before["ca.pem"]) {
		t.Error("making one certificate again replaced the CA")
	}
}

// TestGenCerts_gitignored: the certificates stay out of git.
func TestGenCerts_gitignored(t *testing.T) {
	ignore := string(readRepoFile(t, "deploy/compose/.gitignore"))
	if !slices.Contains(strings.Fields(ignore), "certs/") {
		t.Errorf("deploy/compose/.gitignore: %q does not ignore certs/", ignore)
	}
}
