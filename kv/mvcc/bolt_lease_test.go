package mvcc

import (
	"encoding/binary"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/encoding/protowire"
)

// TestWriteBolt_leases: the snapshot file holds the leases in etcd's
// lessor layout (bucket "lease": the id, 8 bytes big-endian ->
// leasepb.Lease{ID: 1, TTL: 2, RemainingTTL: 3}), so that an etcd
// restored from it finds the lease of each leased key: the bucket was
// empty, and such an etcd logged "unexpected Attach error: lease not
// found" and kept the key for ever.
func TestWriteBolt_leases(t *testing.T) {
	sm, st := newTestStateMachine(t, Config{})
	apply(t, sm, &pb.InternalRaftRequest{LeaseGrant: &pb.LeaseGrantRequest{ID: 7, TTL: 60}})
	apply(t, sm, &pb.InternalRaftRequest{Put: &pb.PutRequest{Key: []byte("leased"), Value: []byte("v"), Lease: 7}})
	path := filepath.Join(t.TempDir(), "snap.db")
	if err := st.WriteBolt(path); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got := map[uint64]map[protowire.Number]uint64{}
	err = db.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("lease")).ForEach(func(k, v []byte) error {
			fields := map[protowire.Number]uint64{}
			for len(v) > 0 {
				num, typ, n := protowire.ConsumeTag(v)
				if n < 0 || typ != protowire.VarintType {
					t.Fatalf("lease %x: bad field", k)
				}
				x, m := protowire.ConsumeVarint(v[n:])
				if m < 0 {
					t.Fatalf("lease %x: bad varint", k)
				}
				fields[num] = x
				v = v[n+m:]
			}
			got[binary.BigEndian.Uint64(k)] = fields
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	l, ok := got[7]
	if len(got) != 1 || !ok || l[1] != 7 || l[2] != 60 || l[3] == 0 || l[3] > 60 {
		t.Fatalf("lease bucket %v, want lease 7 with TTL 60 and its time left", got)
	}
}
