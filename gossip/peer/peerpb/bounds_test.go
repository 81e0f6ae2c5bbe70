package peerpb

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// TestCheckCount: the elements of a bounded field are counted, other
// fields skipped, and one past the bound refused; bytes that do not parse
// are refused too.
func TestCheckCount(t *testing.T) {
	hold := func(n int) []byte {
		r := &HoldRequest{}
		for range n {
			r.Messages = append(r.Messages, &QueueMessage{})
		}
		b, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return protowire.AppendVarint(protowire.AppendTag(b, 7, protowire.VarintType), 1) // an unknown field
	}
	bounds := (&HoldRequest{}).CountedFields()
	most := bounds[0].Most
	if err := CheckCount(hold(most), bounds); err != nil {
		t.Errorf("%d messages: %v", most, err)
	}
	if err := CheckCount(hold(most+1), bounds); !errors.Is(err, ErrTooMany) {
		t.Errorf("%d messages: %v, want ErrTooMany", most+1, err)
	}
	if err := CheckCount([]byte{0x0a, 0x05, 0x01}, bounds); err == nil {
		t.Error("a field cut short: no error")
	}
	bounds = (&ProposeRequest{}).CountedFields()
	b, err := proto.Marshal(&ProposeRequest{Commands: make([][]byte, bounds[0].Most+1)})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckCount(b, bounds); !errors.Is(err, ErrTooMany) {
		t.Errorf("%d commands: %v, want ErrTooMany", bounds[0].Most+1, err)
	}
	// A status: its backups are bounded on their own, past the queues.
	st := &StatusResponse{Queues: make([]*QueueState, MaxStatusQueues), Backups: make([]*BackupState, MaxStatusBackups+1)}
	for i := range st.Queues {
		st.Queues[i] = &QueueState{}
	}
	for i := range st.Backups {
		st.Backups[i] = &BackupState{}
	}
	if b, err = proto.Marshal(st); err != nil {
		t.Fatal(err)
	}
	if err := CheckCount(b, st.CountedFields()); !errors.Is(err, ErrTooMany) || !strings.Contains(err.Error(), "field 2") {
		t.Errorf("a status of %d backups: %v, want ErrTooMany of field 2", MaxStatusBackups+1, err)
	}
	st.Backups = st.Backups[:MaxStatusBackups]
	if b, err = proto.Marshal(st); err != nil {
		t.Fatal(err)
	}
	if err := CheckCount(b, st.CountedFields()); err != nil {
		t.Errorf("a status at its bounds: %v", err)
	}
}
