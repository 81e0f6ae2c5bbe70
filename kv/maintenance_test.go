package kv

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

// TestMaintenance_statusAndMembers checks what etcdctl endpoint status and
// member list read.
func TestMaintenance_statusAndMembers(t *testing.T) {
	srv, cli := startServer(t, func(c *Config) { c.AdvertisePeerURLs = []string{"http://127.0.0.1:2380"} })
	ctx := testCtx(t, 10*time.Second)
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	ep := srv.ClientAddrs()[0].String()
	st, err := cli.Status(ctx, ep)
	if err != nil {
		t.Fatal(err)
	}
	if st.Leader != 0xabcd || st.Header.MemberId != 0xabcd || st.RaftIndex != 2 || st.RaftTerm != 1 || st.Version != APIVersion || st.DbSize <= 0 {
		t.Fatalf("status: got %+v", st)
	}
	ml, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ml.Members) != 1 {
		t.Fatalf("members: got %d, want 1", len(ml.Members))
	}
	m := ml.Members[0]
	if m.ID != 0xabcd || m.Name != "test" || len(m.ClientURLs) != 1 || m.ClientURLs[0] != "http://"+ep || m.PeerURLs[0] != "http://127.0.0.1:2380" {
		t.Fatalf("member: got %+v", m)
	}
	if _, err := cli.MemberAdd(ctx, []string{"http://127.0.0.1:9"}); err == nil {
		t.Fatal("MemberAdd succeeded; membership comes from gossip")
	}
	alarms, err := cli.AlarmList(ctx)
	if err != nil || len(alarms.Alarms) != 0 {
		t.Fatalf("alarms: got %v, %v; want none", alarms, err)
	}
	if _, err := cli.Defragment(ctx, ep); err != nil {
		t.Fatal(err)
	}
}

// TestMaintenance_hashEqualForEqualData checks that two servers holding the
// same keys report the same Hash and HashKV although their revisions differ,
// and that different data gives a different hash.
func TestMaintenance_hashEqualForEqualData(t *testing.T) {
	srvA, a := startServer(t, nil)
	srvB, b := startServer(t, nil)
	ctx := testCtx(t, 10*time.Second)
	for _, op := range []clientv3.Op{clientv3.OpPut("x", "1"), clientv3.OpPut("y", "2")} {
		if _, err := a.Do(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	for _, op := range []clientv3.Op{clientv3.OpPut("y", "0"), clientv3.OpPut("y", "2"), clientv3.OpPut("x", "1")} {
		if _, err := b.Do(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	ha, err := a.HashKV(ctx, srvA.ClientAddrs()[0].String(), 0)
	if err != nil {
		t.Fatal(err)
	}
	hb, err := b.HashKV(ctx, srvB.ClientAddrs()[0].String(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if ha.Hash != hb.Hash {
		t.Fatalf("hash of equal data: %x != %x", ha.Hash, hb.Hash)
	}
	if _, err := b.Put(ctx, "x", "changed"); err != nil {
		t.Fatal(err)
	}
	hb2, err := b.HashKV(ctx, srvB.ClientAddrs()[0].String(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if hb2.Hash == hb.Hash {
		t.Fatal("hash did not change with the data")
	}
	old, err := b.HashKV(ctx, srvB.ClientAddrs()[0].String(), 4)
	if err != nil {
		t.Fatal(err)
	}
	if old.Hash != hb.Hash {
		t.Fatalf("hash at an old revision: %x, want %x", old.Hash, hb.Hash)
	}
}

// TestMaintenance_snapshotIsBoltWithChecksum checks that Snapshot streams a
// bbolt file holding every revision in etcd's layout, followed by its SHA-256.
func TestMaintenance_snapshotIsBoltWithChecksum(t *testing.T) {
	_, cli := startServer(t, nil)
	ctx := testCtx(t, 10*time.Second)
	for i := range 3 {
		if _, err := cli.Put(ctx, "s", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Delete(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) < sha256.Size {
		t.Fatalf("snapshot of %d bytes", len(data))
	}
	db, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if want := sha256.Sum256(db); !bytes.Equal(sum, want[:]) {
		t.Fatal("snapshot checksum does not match its content")
	}
	path := filepath.Join(t.TempDir(), "snap.db")
	if err := os.WriteFile(path, db, 0o600); err != nil {
		t.Fatal(err)
	}
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	var got []string
	err = bdb.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("key")).ForEach(func(k, v []byte) error {
			var kv mvccpb.KeyValue
			if err := proto.Unmarshal(v, &kv); err != nil {
				return err
			}
			got = append(got, fmt.Sprintf("%s=%s tomb=%v", kv.Key, kv.Value, len(k) == 18))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "[s=0 tomb=false s=1 tomb=false s=2 tomb=false s= tomb=true]"
	if fmt.Sprint(got) != want {
		t.Fatalf("snapshot revisions: got %v, want %v", got, want)
	}
}

// TestStore_autoCompaction checks that the store keeps at least
// HistoryRevisions revisions and compacts older ones by itself.
func TestStore_autoCompaction(t *testing.T) {
	_, cli := startServer(t, func(c *Config) { c.HistoryRevisions = 10 })
	ctx := testCtx(t, 10*time.Second)
	for i := range 30 { // revisions 2..31
		if _, err := cli.Put(ctx, "a", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	// Twice 10 revisions accumulated at 20 and at 30: compacted to 10, then 20.
	if _, err := cli.Get(ctx, "a", clientv3.WithRev(19)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("revision 19: got %v, want %v", err, rpctypes.ErrCompacted)
	}
	r, err := cli.Get(ctx, "a", clientv3.WithRev(20))
	if err != nil {
		t.Fatalf("revision 20 (the compaction revision): %v", err)
	}
	if string(r.Kvs[0].Value) != "18" {
		t.Fatalf("value at 20: got %s, want 18", r.Kvs[0].Value)
	}
}
