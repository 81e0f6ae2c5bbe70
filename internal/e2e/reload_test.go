//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"chute/internal/chtest"
)

// TestReload_sighupChangesClickHouseURL starts a node whose YAML file names
// no reachable ClickHouse: rows stay queued. The file is rewritten with the
// right URL and the node gets SIGHUP: the rows land with no further put.
// A reload with an empty URL keeps the current one.
func TestReload_sighupChangesClickHouseURL(t *testing.T) {
	t.Parallel()
	ch := chtest.Start(t)
	ch.Exec(t, "CREATE TABLE default.reloaded (id UInt64) ENGINE = MergeTree ORDER BY id")
	cfgPath := filepath.Join(t.TempDir(), "chute.yaml")
	write := func(url string) {
		if err := os.WriteFile(cfgPath, []byte("clickhouse_url: "+url+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("http://127.0.0.1:1") // nothing listens there
	node := StartChute(t, "--config", cfgPath)
	cli := clusterClient(t, node.ClientAddr)
	ctx, cancel := rpcCtx()
	defer cancel()
	for _, k := range []string{"1", "2", "3"} {
		if _, err := cli.Put(ctx, "/q/ch:reloaded/p/"+k, `{"id":`+k+`}`); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond) // a few failed attempts
	if n := ch.Count(t, "default.reloaded"); n != 0 {
		t.Fatalf("rows before the reload: %d", n)
	}
	write(ch.URL())
	if err := node.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for ch.Count(t, "default.reloaded") != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("rows after SIGHUP: got %d, want 3", ch.Count(t, "default.reloaded"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	write(`""`)
	if err := node.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/q/ch:reloaded/p/4", `{"id":4}`); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(15 * time.Second)
	for ch.Count(t, "default.reloaded") != 4 {
		if time.Now().After(deadline) {
			t.Fatalf("an empty url in the reloaded file must keep the old one: rows %d, want 4", ch.Count(t, "default.reloaded"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
