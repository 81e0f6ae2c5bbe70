package dispatch

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"chute/gossip/peer/peerpb"
)

// TestStatusResponse_roundTrip checks that a Status sent to another
// member reads back the same there.
func TestStatusResponse_roundTrip(t *testing.T) {
	want := Status{
		Queues: []QueueStatus{
			{Name: "ch:events", Dispatcher: "a0fafd8d2ec085b7", Epoch: 3, Rows: 4, Held: 1, Bytes: 99, Unacked: 4, Consumers: 1,
				LocalConsumers: 0, Ack: AckReplicated, Backup: "0000000000000005", Stats: queueStats{Enqueued: 9, Delivered: 8, Redelivered: 7, Acked: 6, Refused: 5, Waited: 4},
				LastInsertError: &InsertError{Time: time.Unix(1700000000, 5).UTC(), Table: "`default`.`events`", Class: "config", Code: 60, Status: 404, Message: "no table"}},
			{Name: "orders", Epoch: 0, Ack: AckQueued, Stats: queueStats{}},
		},
		Backups: []BackupStatus{{Queue: "orders", Dispatcher: "000000000000001f", Rows: 2, Bytes: 20}},
	}
	resp := toStatusResponse(want)
	if err := checkStatusResponse(resp); err != nil {
		t.Fatalf("checkStatusResponse of a valid answer: %v", err)
	}
	if got := fromStatusResponse(resp); !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

// TestStatusResponse_bounded checks that a member sends at most the
// bounds and counts the rest.
func TestStatusResponse_bounded(t *testing.T) {
	st := Status{Queues: make([]QueueStatus, statusMaxQueues+3), Backups: make([]BackupStatus, statusMaxBackups+1)}
	for i := range st.Queues {
		st.Queues[i].Name = "q"
	}
	resp := toStatusResponse(st)
	if len(resp.Queues) != statusMaxQueues || resp.OmittedQueues != 3 || len(resp.Backups) != statusMaxBackups || resp.OmittedBackups != 1 {
		t.Errorf("got %d queues (%d omitted), %d backups (%d omitted); want %d (3), %d (1)",
			len(resp.Queues), resp.OmittedQueues, len(resp.Backups), resp.OmittedBackups, statusMaxQueues, statusMaxBackups)
	}
}

func TestCheckStatusResponse_refused(t *testing.T) {
	long := strings.Repeat("x", statusMaxText+1)
	many := make([]*peerpb.QueueState, statusMaxQueues+1)
	for i := range many {
		many[i] = &peerpb.QueueState{Name: "q"}
	}
	tests := []struct {
		name string
		resp *peerpb.StatusResponse
	}{
		{"too many queues", &peerpb.StatusResponse{Queues: many}},
		{"too many backups", &peerpb.StatusResponse{Backups: make([]*peerpb.BackupState, statusMaxBackups+1)}},
		{"empty queue name", &peerpb.StatusResponse{Queues: []*peerpb.QueueState{{}}}},
		{"long queue name", &peerpb.StatusResponse{Queues: []*peerpb.QueueState{{Name: long}}}},
		{"negative rows", &peerpb.StatusResponse{Queues: []*peerpb.QueueState{{Name: "q", Rows: -1}}}},
		{"long insert error", &peerpb.StatusResponse{Queues: []*peerpb.QueueState{{Name: "q", LastInsertError: &peerpb.InsertFailure{Message: long}}}}},
		{"negative backup bytes", &peerpb.StatusResponse{Backups: []*peerpb.BackupState{{Queue: "q", Bytes: -1}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := checkStatusResponse(tt.resp); !errors.Is(err, errBadStatus) {
				t.Errorf("got %v, want errBadStatus", err)
			}
		})
	}
}
