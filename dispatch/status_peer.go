package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc"

	"chute/gossip"
	"chute/gossip/peer/peerpb"
)

// Bounds of a member's Status answer. The answering member sends at most
// statusMaxQueues queues and statusMaxBackups backups and counts the
// rest; the asking member refuses an answer over them, or over
// statusMaxBytes, as it would a client's request: a member is trusted
// to be a member, not to be correct.
const (
	statusMaxQueues  = peerpb.MaxStatusQueues
	statusMaxBackups = peerpb.MaxStatusBackups
	statusMaxBytes   = 16 << 20
	// statusMaxText bounds a text field of an answer: a queue name
	// (a key segment), an ack mode, an insert error's parts (cut to about
	// 512 bytes by the member that made it).
	statusMaxText = 4 << 10
)

// errBadStatus marks a member's Status answer refused by checkStatusResponse.
var errBadStatus = errors.New("dispatch: member's status refused")

// Status answers another member's cluster-wide status: the queues this
// member holds and the copies it keeps, by name, bounded.
func (s *queueService) Status(context.Context, *peerpb.StatusRequest) (*peerpb.StatusResponse, error) {
	return toStatusResponse(s.m.Status()), nil
}

// PeerStatus asks the alive member of that id for its Status over the
// peer link, within ctx. It refuses an answer no member should send.
func (m *Manager) PeerStatus(ctx context.Context, member uint64) (Status, error) {
	addr, ok := m.peerAddr(member)
	if !ok {
		return Status{}, fmt.Errorf("dispatch: member %s is not an alive peer", gossip.ID(member).String())
	}
	conn, err := m.conn(addr)
	if err != nil {
		return Status{}, err
	}
	resp, err := peerpb.NewQueuesClient(conn).Status(m.outgoing(ctx), &peerpb.StatusRequest{}, grpc.MaxCallRecvMsgSize(statusMaxBytes))
	if err != nil {
		return Status{}, err
	}
	if err := checkStatusResponse(resp); err != nil {
		return Status{}, err
	}
	st := fromStatusResponse(resp)
	st.Omitted = int(resp.OmittedQueues) + int(resp.OmittedBackups)
	return st, nil
}

func toStatusResponse(st Status) *peerpb.StatusResponse {
	resp := &peerpb.StatusResponse{}
	qs, bs := st.Queues, st.Backups
	if len(qs) > statusMaxQueues {
		resp.OmittedQueues = uint32(len(qs) - statusMaxQueues)
		qs = qs[:statusMaxQueues]
	}
	if len(bs) > statusMaxBackups {
		resp.OmittedBackups = uint32(len(bs) - statusMaxBackups)
		bs = bs[:statusMaxBackups]
	}
	for _, q := range qs {
		dispatcher, _ := strconv.ParseUint(q.Dispatcher, 16, 64)
		backup, _ := strconv.ParseUint(q.Backup, 16, 64)
		qs := &peerpb.QueueState{
			Name: q.Name, Dispatcher: dispatcher, Epoch: q.Epoch,
			Rows: int64(q.Rows), Held: int64(q.Held), Bytes: q.Bytes, Unacked: int64(q.Unacked),
			Consumers: int64(q.Consumers), LocalConsumers: int64(q.LocalConsumers),
			Ack: string(q.Ack), Backup: backup,
			Enqueued: q.Stats.Enqueued, Delivered: q.Stats.Delivered, Redelivered: q.Stats.Redelivered,
			Acked: q.Stats.Acked, Refused: q.Stats.Refused, Waited: q.Stats.Waited,
		}
		if e := q.LastInsertError; e != nil {
			qs.LastInsertError = &peerpb.InsertFailure{UnixNanos: e.Time.UnixNano(), Table: e.Table, Class: e.Class,
				Code: int64(e.Code), HttpStatus: int64(e.Status), Message: e.Message}
		}
		resp.Queues = append(resp.Queues, qs)
	}
	for _, b := range bs {
		dispatcher, _ := strconv.ParseUint(b.Dispatcher, 16, 64)
		resp.Backups = append(resp.Backups, &peerpb.BackupState{Queue: b.Queue, Dispatcher: dispatcher, Rows: int64(b.Rows), Bytes: b.Bytes})
	}
	return resp
}

// checkStatusResponse refuses an answer over the bounds, or with counts
// no queue can have.
func checkStatusResponse(r *peerpb.StatusResponse) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", errBadStatus, fmt.Sprintf(format, args...))
	}
	if len(r.Queues) > statusMaxQueues || len(r.Backups) > statusMaxBackups {
		return bad("%d queues and %d backups, at most %d and %d", len(r.Queues), len(r.Backups), statusMaxQueues, statusMaxBackups)
	}
	text := func(s string) bool { return len(s) <= statusMaxText }
	for _, q := range r.Queues {
		if q.Name == "" || !text(q.Name) || !text(q.Ack) {
			return bad("a queue's name or ack mode is empty or too long")
		}
		if q.Rows < 0 || q.Held < 0 || q.Bytes < 0 || q.Unacked < 0 || q.Consumers < 0 || q.LocalConsumers < 0 {
			return bad("queue %.64q: a negative count", q.Name)
		}
		if e := q.LastInsertError; e != nil && (!text(e.Table) || !text(e.Class) || !text(e.Message)) {
			return bad("queue %.64q: insert error text too long", q.Name)
		}
	}
	for _, b := range r.Backups {
		if b.Queue == "" || !text(b.Queue) || b.Rows < 0 || b.Bytes < 0 {
			return bad("a backup's queue name is empty or too long, or a count negative")
		}
	}
	return nil
}

// fromStatusResponse is the Status a checked answer describes. Counts
// past an int's range cannot occur after checkStatusResponse on 64-bit
// platforms, the only ones chute builds for.
func fromStatusResponse(r *peerpb.StatusResponse) Status {
	st := Status{Queues: make([]QueueStatus, 0, len(r.Queues)), Backups: make([]BackupStatus, 0, len(r.Backups))}
	for _, q := range r.Queues {
		qs := QueueStatus{
			Name: q.Name, Dispatcher: gossip.ID(q.Dispatcher).String(), Epoch: q.Epoch,
			Rows: int(q.Rows), Held: int(q.Held), Bytes: q.Bytes, Unacked: int(q.Unacked),
			Consumers: int(q.Consumers), LocalConsumers: int(q.LocalConsumers),
			Ack: AckMode(q.Ack),
			Stats: queueStats{Enqueued: q.Enqueued, Delivered: q.Delivered, Redelivered: q.Redelivered,
				Acked: q.Acked, Refused: q.Refused, Waited: q.Waited},
		}
		if q.Dispatcher == 0 {
			qs.Dispatcher = ""
		}
		if q.Backup != 0 {
			qs.Backup = gossip.ID(q.Backup).String()
		}
		if e := q.LastInsertError; e != nil {
			qs.LastInsertError = &InsertError{Time: time.Unix(0, e.UnixNanos).UTC(), Table: e.Table, Class: e.Class,
				Code: int(e.Code), Status: int(e.HttpStatus), Message: e.Message}
		}
		st.Queues = append(st.Queues, qs)
	}
	for _, b := range r.Backups {
		st.Backups = append(st.Backups, BackupStatus{Queue: b.Queue, Dispatcher: gossip.ID(b.Dispatcher).String(), Rows: int(b.Rows), Bytes: b.Bytes})
	}
	return st
}
