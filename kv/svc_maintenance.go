package kv

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/kv/mvcc"
)

// maintenanceService is etcd's Maintenance service. chute has no raft: this
// member always reports itself as the leader (clients read leader 0 as "no
// leader"), raft_index is the store revision and raft_term a counter that
// only grows.
type maintenanceService struct {
	pb.UnimplementedMaintenanceServer
	srv      *Server
	store    *mvcc.Store
	memberID uint64 // Config.MemberID
	version  string
}

var _ pb.MaintenanceServer = (*maintenanceService)(nil)

// Alarm serves etcd's alarms: GET lists the alarms of every member as a
// linearizable read does; ACTIVATE and DEACTIVATE are commands, applied
// by every member in log order (mvcc's alarm.go). etcdctl alarm disarm
// lists the alarms and deactivates each.
func (m *maintenanceService) Alarm(ctx context.Context, r *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	if err := checkAlarmRequest(r); err != nil {
		return nil, toGRPC(err)
	}
	if r.Action == pb.AlarmRequest_GET {
		if err := m.srv.linearize(ctx); err != nil {
			return nil, toGRPC(err)
		}
		return &pb.AlarmResponse{Header: m.store.Header(m.store.Rev()), Alarms: m.store.Alarms(r.Alarm)}, nil
	}
	res := m.srv.write(ctx, &pb.InternalRaftRequest{Alarm: r})
	if res.Err != nil {
		return nil, toGRPC(res.Err)
	}
	resp := res.Resp.(*pb.AlarmResponse)
	resp.Header = m.store.Header(res.Rev)
	for _, a := range resp.Alarms {
		if r.Action == pb.AlarmRequest_ACTIVATE {
			m.srv.log.Warn("alarm raised", "alarm", a.Alarm.String(), "member_id", memberHex(a.MemberID))
		} else {
			m.srv.log.Info("alarm disarmed", "alarm", a.Alarm.String(), "member_id", memberHex(a.MemberID))
		}
	}
	return resp, nil
}

func (m *maintenanceService) Status(_ context.Context, _ *pb.StatusRequest) (*pb.StatusResponse, error) {
	rev, size := m.store.Status()
	resp := &pb.StatusResponse{
		Header:           m.store.Header(rev),
		Version:          m.version,
		DbSize:           size,
		DbSizeInUse:      size,
		Leader:           m.memberID,
		RaftIndex:        uint64(rev),
		RaftAppliedIndex: uint64(rev),
		RaftTerm:         initialRaftTerm,
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
		// As MemberList lists it: raft's non-voter is etcd's learner,
		// which etcdctl endpoint status shows (IS LEARNER).
		for _, mb := range m.srv.members() {
			if mb.ID == m.memberID {
				resp.IsLearner = mb.IsLearner
			}
		}
	}
	// As etcd, the raised alarms, which etcdctl endpoint status shows.
	for _, a := range m.store.Alarms(pb.AlarmType_NONE) {
		resp.Errors = append(resp.Errors, alarmText(a))
	}
	return resp, nil
}

// Defragment has nothing to do in memory.
func (m *maintenanceService) Defragment(_ context.Context, _ *pb.DefragmentRequest) (*pb.DefragmentResponse, error) {
	return &pb.DefragmentResponse{Header: m.store.Header(m.store.Rev())}, nil
}

// Hash is a CRC-32C of every live key and value in key order. It leaves out
// revisions, which are local to a member, so two members holding the same
// data report the same hash.
func (m *maintenanceService) Hash(_ context.Context, _ *pb.HashRequest) (*pb.HashResponse, error) {
	h, rev, _, err := m.store.HashKV(0)
	if err != nil {
		return nil, toGRPC(err)
	}
	return &pb.HashResponse{Header: m.store.Header(rev), Hash: h}, nil
}

// HashKV is Hash as of a revision (0 = current).
func (m *maintenanceService) HashKV(_ context.Context, r *pb.HashKVRequest) (*pb.HashKVResponse, error) {
	h, rev, compactRev, err := m.store.HashKV(r.Revision)
	if err != nil {
		return nil, toGRPC(err)
	}
	if compactRev == 0 {
		compactRev = -1 // as etcd reports "never compacted"
	}
	return &pb.HashKVResponse{Header: m.store.Header(rev), Hash: h, CompactRevision: compactRev, HashRevision: rev}, nil
}

// Snapshot streams the store as a bbolt file in etcd's backend layout.
func (m *maintenanceService) Snapshot(_ *pb.SnapshotRequest, stream grpc.ServerStreamingServer[pb.SnapshotResponse]) error {
	return writeSnapshot(stream.Context(), m.store, func(chunk []byte, remaining uint64) error {
		return stream.Send(&pb.SnapshotResponse{
			Header:         m.store.Header(m.store.Rev()),
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
	} else if r.TargetID != m.memberID {
		return nil, toGRPC(ErrBadTransferee)
	}
	return &pb.MoveLeaderResponse{Header: m.store.Header(m.store.Rev())}, nil
}

func (m *maintenanceService) Downgrade(_ context.Context, _ *pb.DowngradeRequest) (*pb.DowngradeResponse, error) {
	return nil, status.Error(codes.Unimplemented, "chute: downgrade is not supported: chute has no cluster version to downgrade")
}

// snapshotChunk is the size of one Snapshot response's blob.
const snapshotChunk = 32 * 1024

// writeSnapshot writes the store as etcd's snapshot stream: a bbolt file in
// etcd's backend layout (mvcc.Store.WriteBolt), followed by the SHA-256 of
// the file, as etcd appends it. So `etcdctl snapshot save` and `etcdutl
// snapshot status` work on it. The file is built in a temporary directory
// and removed afterwards.
func writeSnapshot(ctx context.Context, s *mvcc.Store, send func(chunk []byte, remaining uint64) error) error {
	dir, err := os.MkdirTemp("", "chute-snapshot-")
	if err != nil {
		return fmt.Errorf("kv: snapshot: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "db")
	if err := s.WriteBolt(path); err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("kv: snapshot: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("kv: snapshot: %w", err)
	}
	h := sha256.New()
	remaining := uint64(fi.Size()) + sha256.Size
	buf := make([]byte, snapshotChunk)
	for {
		if err := ctx.Err(); err != nil {
			return toGRPC(err)
		}
		n, rerr := f.Read(buf)
		if n > 0 {
			h.Write(buf[:n])
			remaining -= uint64(n)
			if err := send(append([]byte(nil), buf[:n]...), remaining); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return fmt.Errorf("kv: snapshot: %w", rerr)
		}
	}
	return send(h.Sum(nil), 0)
}
