package kv

import (
	"testing"
	"time"
)

func TestServer_smoke(t *testing.T) {
	_, cli := startServer(t, nil)
	ctx := testCtx(t, 10*time.Second)
	if _, err := cli.Put(ctx, "a", "1"); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "1" {
		t.Fatalf("got %v", resp.Kvs)
	}
	t.Logf("header %+v", resp.Header)
}
