package kv

import (
	"context"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// RaiseNoSpace raises the NOSPACE alarm for this member, as etcd raises
// it when its backend passes its quota: until someone disarms it (etcdctl
// alarm disarm), every member refuses the writes that grow the data with
// etcd's "etcdserver: mvcc: database space exceeded", puts to queues
// included. It is for this node's own components, whose disk refused a
// write.
//
// It is idempotent: it returns nil at once when this member has applied
// its own NOSPACE alarm, and concurrent calls propose the alarm once.
// Errors are those of a write of this node's own (ErrNoLeader at once
// without a known leader, ErrTimeout, ctx's error); a ctx without a
// deadline is bounded by internalWriteTimeout.
func (s *Server) RaiseNoSpace(ctx context.Context) error {
	select {
	case s.raising <- struct{}{}:
		defer func() { <-s.raising }()
	case <-ctx.Done():
		return ctx.Err()
	case <-s.stop:
		return ErrStopped
	}
	if s.store.HasAlarm(s.cfg.MemberID, pb.AlarmType_NOSPACE) {
		return nil
	}
	res := s.writeOwn(ctx, &pb.InternalRaftRequest{Alarm: &pb.AlarmRequest{
		Action:   pb.AlarmRequest_ACTIVATE,
		MemberID: s.cfg.MemberID,
		Alarm:    pb.AlarmType_NOSPACE,
	}})
	if res.Err != nil {
		return fmt.Errorf("kv: raise NOSPACE alarm: %w", res.Err)
	}
	s.log.Warn("alarm raised", "alarm", pb.AlarmType_NOSPACE.String(), "member_id", memberHex(s.cfg.MemberID))
	return nil
}

// checkAlarmRequest validates an Alarm request without looking at the
// store: one of etcd's three actions, on an alarm type etcd knows; and
// activations of NOSPACE only (or NONE, which raises nothing, as in etcd).
// chute never raises CORRUPT, and an alarm it does not act on would only
// mislead.
func checkAlarmRequest(r *pb.AlarmRequest) error {
	if _, ok := pb.AlarmRequest_AlarmAction_name[int32(r.Action)]; !ok {
		return fmt.Errorf("%w: action %d", ErrAlarmUnsupported, r.Action)
	}
	if _, ok := pb.AlarmType_name[int32(r.Alarm)]; !ok {
		return fmt.Errorf("%w: alarm type %d", ErrAlarmUnsupported, r.Alarm)
	}
	if r.Action == pb.AlarmRequest_ACTIVATE && r.Alarm != pb.AlarmType_NOSPACE && r.Alarm != pb.AlarmType_NONE {
		return fmt.Errorf("%w: activate %s", ErrAlarmUnsupported, r.Alarm)
	}
	return nil
}

// alarmText is an alarm as etcd 3.4 writes it in Status's errors: the
// compact protobuf text of its AlarmMember, which newer protobuf
// libraries no longer print byte for byte alike.
func alarmText(a *pb.AlarmMember) string {
	return fmt.Sprintf("memberID:%d alarm:%s ", a.MemberID, a.Alarm)
}

// memberHex formats a member id as etcdctl member list prints it.
func memberHex(id uint64) string { return fmt.Sprintf("%016x", id) }
