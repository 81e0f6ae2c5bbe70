package kv

import (
	"context"
	"hash/crc32"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// maintenanceService is etcd's Maintenance service. chute has no raft: this
// member always reports itself as the leader (clients read leader 0 as "no
// leader"), raft_index is the store revision and raft_term a counter that
// only grows.
type maintenanceService struct {
	pb.UnimplementedMaintenanceServer
	srv     *Server
	store   *store
	version string
}

var _ pb.MaintenanceServer = (*maintenanceService)(nil)

// Alarm lists no alarms: an in-memory store has no space quota to trip.
// Activating or deactivating one changes nothing.
func (m *maintenanceService) Alarm(_ context.Context, _ *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	return &pb.AlarmResponse{Header: m.store.header(m.store.currentRev())}, nil
}

func (m *maintenanceService) Status(_ context.Context, _ *pb.StatusRequest) (*pb.StatusResponse, error) {
	st := m.store.status()
	resp := &pb.StatusResponse{
		Header:           m.store.header(st.rev),
		Version:          m.version,
		DbSize:           st.bytes,
		DbSizeInUse:      st.bytes,
		Leader:           m.store.cfg.memberID,
		RaftIndex:        uint64(st.rev),
		RaftAppliedIndex: uint64(st.rev),
		RaftTerm:         m.store.cfg.raftTerm,
		StorageVersion:   m.version,
	}
	if c := m.srv.consensus; c != nil {
		cs := c.Status()
		resp.Leader = cs.Leader
		resp.RaftIndex = cs.CommitIndex
		resp.RaftAppliedIndex = m.srv.sm.Applied()
		resp.RaftTerm = cs.Term
		resp.Header.RaftTerm = cs.Term
		if cs.Leader == 0 {
			resp.Errors = []string{"etcdserver: no leader"}
		}
	}
	return resp, nil
}

// Defragment has nothing to do in memory.
func (m *maintenanceService) Defragment(_ context.Context, _ *pb.DefragmentRequest) (*pb.DefragmentResponse, error) {
	return &pb.DefragmentResponse{Header: m.store.header(m.store.currentRev())}, nil
}

// Hash is a CRC-32C of every live key and value in key order. It leaves out
// revisions, which are local to a member, so two members holding the same
// data report the same hash.
func (m *maintenanceService) Hash(_ context.Context, _ *pb.HashRequest) (*pb.HashResponse, error) {
	h, rev, _, err := m.store.hashKV(0)
	if err != nil {
		return nil, toGRPC(err)
	}
	return &pb.HashResponse{Header: m.store.header(rev), Hash: h}, nil
}

// HashKV is Hash as of a revision (0 = current).
func (m *maintenanceService) HashKV(_ context.Context, r *pb.HashKVRequest) (*pb.HashKVResponse, error) {
	h, rev, compactRev, err := m.store.hashKV(r.Revision)
	if err != nil {
		return nil, toGRPC(err)
	}
	if compactRev == 0 {
		compactRev = -1 // as etcd reports "never compacted"
	}
	return &pb.HashKVResponse{Header: m.store.header(rev), Hash: h, CompactRevision: compactRev, HashRevision: rev}, nil
}

// Snapshot streams the store as a bbolt file in etcd's backend layout.
func (m *maintenanceService) Snapshot(_ *pb.SnapshotRequest, stream grpc.ServerStreamingServer[pb.SnapshotResponse]) error {
	return writeSnapshot(stream.Context(), m.store, func(chunk []byte, remaining uint64) error {
		return stream.Send(&pb.SnapshotResponse{
			Header:         m.store.header(m.store.currentRev()),
			Blob:           chunk,
			RemainingBytes: remaining,
			Version:        m.version,
		})
	})
}

// MoveLeader transfers the leadership to the member named, as etcd: only
// the leader does it, and only to a voter. A member alone leads already:
// moving to itself succeeds, to anyone else is a bad transferee.
func (m *maintenanceService) MoveLeader(ctx context.Context, r *pb.MoveLeaderRequest) (*pb.MoveLeaderResponse, error) {
	if c := m.srv.consensus; c != nil {
		if err := c.TransferLeader(ctx, r.TargetID); err != nil {
			return nil, toGRPC(err)
		}
	} else if r.TargetID != m.store.cfg.memberID {
		return nil, toGRPC(ErrBadTransferee)
	}
	return &pb.MoveLeaderResponse{Header: m.store.header(m.store.currentRev())}, nil
}

func (m *maintenanceService) Downgrade(_ context.Context, _ *pb.DowngradeRequest) (*pb.DowngradeResponse, error) {
	return nil, status.Error(codes.Unimplemented, "chute: downgrade is not supported: chute has no cluster version to downgrade")
}

// storeStatus is what Status reports.
type storeStatus struct {
	rev   int64
	bytes int64
}

func (s *store) status() storeStatus {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return storeStatus{rev: s.rev, bytes: s.bytes}
}

// hashKV hashes every key and value live at rev (0 = current) in key order.
// It returns the hash, the revision hashed and the compaction revision.
func (s *store) hashKV(rev int64) (uint32, int64, int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	at, err := s.checkRev(rev)
	if err != nil {
		return 0, 0, 0, err
	}
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	_, _ = h.Write([]byte("chute")) // so that an empty store does not hash to 0
	s.tree.Ascend(func(ki *keyIndex) bool {
		if kv := ki.at(at); kv != nil {
			writeHashed(h, kv)
		}
		return true
	})
	return h.Sum32(), at, s.compactRev, nil
}

// writeHashed feeds the key and value, each length-prefixed so that the
// boundary between them is unambiguous.
func writeHashed(h interface{ Write([]byte) (int, error) }, kv *mvccpb.KeyValue) {
	var n [8]byte
	for _, b := range [][]byte{kv.Key, kv.Value} {
		l := uint64(len(b))
		for i := range n {
			n[i] = byte(l >> (8 * i))
		}
		_, _ = h.Write(n[:])
		_, _ = h.Write(b)
	}
}
