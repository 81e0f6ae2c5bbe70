package mvcc

import (
	"sort"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// Alarms are etcd's: a member raises one (NOSPACE when it cannot store
// more) and every member sees it, until someone disarms it. They are
// replicated state like the keys: changed only by Alarm commands, applied
// in log order, kept in snapshots; so every member refuses the same
// writes at the same point of the log.
//
// While a NOSPACE alarm is raised by any member, Apply refuses with
// ErrNoSpace the commands that grow the data, as etcd's capped applier
// does: a Put, a LeaseGrant, a Txn with a put in any branch. Deletes,
// compactions, lease revokes and checkpoints, and Alarm commands still
// apply, so that space can be freed and the alarm disarmed.

// alarmKey is one raised alarm: a member and the alarm it raised.
type alarmKey struct {
	member uint64
	alarm  pb.AlarmType
}

// applyAlarm applies an Alarm command, as etcd's applier does: ACTIVATE
// raises the alarm for the member and answers it (NONE raises nothing);
// DEACTIVATE lowers it and answers it if it was raised; GET answers the
// alarms of the type asked for (NONE: all of them).
func (s *Store) applyAlarm(r *pb.AlarmRequest) *pb.AlarmResponse {
	resp := &pb.AlarmResponse{}
	k := alarmKey{member: r.MemberID, alarm: r.Alarm}
	switch r.Action {
	case pb.AlarmRequest_GET:
		resp.Alarms = s.Alarms(r.Alarm)
	case pb.AlarmRequest_ACTIVATE:
		if r.Alarm == pb.AlarmType_NONE {
			break
		}
		s.mu.Lock()
		s.alarms[k] = struct{}{}
		s.setNoSpaceLocked()
		s.mu.Unlock()
		resp.Alarms = []*pb.AlarmMember{{MemberID: k.member, Alarm: k.alarm}}
	case pb.AlarmRequest_DEACTIVATE:
		s.mu.Lock()
		_, ok := s.alarms[k]
		delete(s.alarms, k)
		s.setNoSpaceLocked()
		s.mu.Unlock()
		if ok {
			resp.Alarms = []*pb.AlarmMember{{MemberID: k.member, Alarm: k.alarm}}
		}
	}
	return resp
}

// setNoSpaceLocked brings noSpace in line with the alarms. The caller
// holds mu for writing.
func (s *Store) setNoSpaceLocked() {
	for k := range s.alarms {
		if k.alarm == pb.AlarmType_NOSPACE {
			s.noSpace.Store(true)
			return
		}
	}
	s.noSpace.Store(false)
}

// Alarms returns the raised alarms of type t (NONE: of every type), by
// member id, then type.
func (s *Store) Alarms(t pb.AlarmType) []*pb.AlarmMember {
	s.mu.RLock()
	out := make([]*pb.AlarmMember, 0, len(s.alarms))
	for k := range s.alarms {
		if t == pb.AlarmType_NONE || k.alarm == t {
			out = append(out, &pb.AlarmMember{MemberID: k.member, Alarm: k.alarm})
		}
	}
	s.mu.RUnlock()
	sortAlarms(out)
	return out
}

// HasAlarm reports whether member has raised alarm t, as far as this
// member applied the log.
func (s *Store) HasAlarm(member uint64, t pb.AlarmType) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.alarms[alarmKey{member: member, alarm: t}]
	return ok
}

// NoSpace reports whether a NOSPACE alarm is raised, as far as this
// member applied the log. It is cheap (an atomic load): kv asks it on
// every put to a queue.
func (s *Store) NoSpace() bool { return s.noSpace.Load() }

func sortAlarms(as []*pb.AlarmMember) {
	sort.Slice(as, func(i, j int) bool {
		if as[i].MemberID != as[j].MemberID {
			return as[i].MemberID < as[j].MemberID
		}
		return as[i].Alarm < as[j].Alarm
	})
}

// growsData reports whether req would add data to the store: what a
// NOSPACE alarm refuses. A txn counts when a put appears in any branch,
// nested txns included, whichever branch its compares would choose (etcd
// looks at the top level's branches only; a nested put grows the data
// just the same).
func growsData(req *pb.InternalRaftRequest) bool {
	switch {
	case req.Put != nil, req.LeaseGrant != nil:
		return true
	case req.Txn != nil:
		return txnPuts(req.Txn)
	}
	return false
}

// txnPuts reports whether any branch of r, nested ones included, puts.
func txnPuts(r *pb.TxnRequest) bool {
	for _, ops := range [][]*pb.RequestOp{r.Success, r.Failure} {
		for _, op := range ops {
			switch o := op.Request.(type) {
			case *pb.RequestOp_RequestPut:
				return true
			case *pb.RequestOp_RequestTxn:
				if txnPuts(o.RequestTxn) {
					return true
				}
			}
		}
	}
	return false
}
