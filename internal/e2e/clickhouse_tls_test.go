//go:build e2e

package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"chute/dispatch"
	"chute/internal/chtest"
	"chute/internal/testcerts"
	"chute/internal/testutil"
)

// insertErrorOn returns last_insert_error of queue on p's /status, nil
// when it has none.
func insertErrorOn(p *Proc, queue string) (*dispatch.InsertError, error) {
	q, _, err := queueOn(p, queue)
	return q.LastInsertError, err
}

// TestClickHouse_TLS runs ClickHouse 18.16 with an https port whose
// certificate a test CA signed, and a user with a password. Node a, with
// --clickhouse-ca-file naming that CA, gets a put from clientv3 into the
// table. Node b, whose CA file holds another CA, keeps its row queued and
// shows a config error in /status that names --clickhouse-ca-file; it
// logs the failure once at warn while it retries; neither node shows the
// password. Once b's CA file holds the right CA and b gets SIGHUP, the
// row lands with no further put.
func TestClickHouse_TLS(t *testing.T) {
	t.Parallel()
	const user, password = "writer", "tls-s3cr3t"
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "clickhouse CA")
	cert, key := ca.Issue(t, "clickhouse", "127.0.0.1").Write(t, dir, "server")
	ch := chtest.Start(t, chtest.Options{User: user, Password: password, TLSCertFile: cert, TLSKeyFile: key})
	ch.Exec(t, "CREATE TABLE default.sealed (id UInt64, s String) ENGINE = MergeTree ORDER BY id")
	url := "https://" + user + ":" + password + "@" + ch.HTTPSAddr()
	caFile := ca.WriteCA(t, dir, "ca")
	bCAFile := testcerts.NewCA(t, "other CA").WriteCA(t, dir, "b-ca")

	a := StartChute(t, "--clickhouse-url", url, "--clickhouse-ca-file", caFile, "--clickhouse-db", "default")
	ctx, cancel := rpcCtx()
	defer cancel()
	if _, err := clusterClient(t, a.ClientAddr).Put(ctx, "/q/ch:sealed/p/x", `{"id":1,"s":"over tls"}`); err != nil {
		t.Fatalf("put on a: %v", err)
	}
	waitQuery(t, ch, rowsTimeout, "SELECT id, s FROM default.sealed", "1\tover tls")

	b := StartChute(t, "--clickhouse-url", url, "--clickhouse-ca-file", bCAFile, "--clickhouse-db", "default", "--log-level", "debug")
	if _, err := clusterClient(t, b.ClientAddr).Put(ctx, "/q/ch:sealed/p/x", `{"id":2,"s":"wrong CA first"}`); err != nil {
		t.Fatalf("put on b: %v", err)
	}
	var last *dispatch.InsertError
	testutil.Eventually(t, chLogTimeout, "a config error of ch:sealed in b's /status", func() error {
		e, err := insertErrorOn(b, "ch:sealed")
		if err != nil {
			return err
		}
		if e == nil {
			return errors.New("no last_insert_error yet")
		}
		last = e
		return nil
	})
	if last.Class != "config" || !strings.Contains(last.Message, "certificate signed by unknown authority") || !strings.Contains(last.Message, "--clickhouse-ca-file") {
		t.Fatalf("b's last_insert_error: got %+v, want class config, the cause and --clickhouse-ca-file", last)
	}
	t.Logf("b's last_insert_error: %+v", last)
	requireDepth(t, b, "ch:sealed", 1)
	// Retried with backoff, logged at warn once, then at debug.
	testutil.Eventually(t, chLogTimeout, "b to retry twice more", func() error {
		if n := len(logLines(t, b, "level=DEBUG", `msg="insert failed; retrying"`, "queue=ch:sealed")); n < 2 {
			return fmt.Errorf("%d retries logged", n)
		}
		return nil
	})
	if warns := logLines(t, b, "level=WARN", `msg="insert failed; retrying"`, "queue=ch:sealed"); len(warns) != 1 || !strings.Contains(warns[0], "--clickhouse-ca-file") {
		t.Errorf("b's warn lines about the failure: got %q, want one naming --clickhouse-ca-file", warns)
	}

	if err := os.WriteFile(bCAFile, ca.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := b.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitQuery(t, ch, rowsTimeout, "SELECT id, s FROM default.sealed ORDER BY id", "1\tover tls\n2\twrong CA first")
	waitDepth(t, b, "ch:sealed", 0)

	for _, p := range []*Proc{a, b} {
		for where, text := range map[string]string{"log": logText(t, p), "/status": httpGet(t, "http://"+p.MetricsAddr+"/status")} {
			if strings.Contains(text, password) {
				t.Errorf("%s: %s holds the password", p.Name, where)
			}
		}
	}
}

// The binary refuses the TLS flags without an https URL, or with files it
// cannot use: exit 2, the flag named, the URL's password never shown.
func TestClickHouse_TLSFlagsExit2(t *testing.T) {
	t.Parallel()
	const password = "flag-s3cr3t"
	dir := t.TempDir()
	caFile := testcerts.NewCA(t, "ca").WriteCA(t, dir, "ca")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--clickhouse-url", "http://u:" + password + "@127.0.0.1:8123", "--clickhouse-ca-file", caFile}, "--clickhouse-ca-file: needs an https:// URL (--clickhouse-url)"},
		{[]string{"--clickhouse-url", "https://u:" + password + "@127.0.0.1:8443", "--clickhouse-ca-file", filepath.Join(dir, "missing.pem")}, "--clickhouse-ca-file: open"},
		{[]string{"--clickhouse-url", "https://u:" + password + "@127.0.0.1:8443", "--clickhouse-key-file", caFile}, "--clickhouse-key-file: needs a certificate file (--clickhouse-cert-file)"},
	}
	for _, tc := range tests {
		cmd := exec.Command(chuteBin, tc.args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Errorf("chute %q: got %v, want exit status 2", tc.want, err)
		}
		if !strings.Contains(stderr.String(), tc.want) || strings.Contains(stderr.String(), password) {
			t.Errorf("stderr %q: want it to contain %q and no password", stderr.String(), tc.want)
		}
	}
}
