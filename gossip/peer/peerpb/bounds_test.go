package peerpb

import (
	"errors"
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
	field, most := (&HoldRequest{}).CountedField()
	if err := CheckCount(hold(most), field, most); err != nil {
		t.Errorf("%d messages: %v", most, err)
	}
	if err := CheckCount(hold(most+1), field, most); !errors.Is(err, ErrTooMany) {
		t.Errorf("%d messages: %v, want ErrTooMany", most+1, err)
	}
	if err := CheckCount([]byte{0x0a, 0x05, 0x01}, field, most); err == nil {
		t.Error("a field cut short: no error")
	}
	field, most = (&ProposeRequest{}).CountedField()
	b, err := proto.Marshal(&ProposeRequest{Commands: make([][]byte, most+1)})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckCount(b, field, most); !errors.Is(err, ErrTooMany) {
		t.Errorf("%d commands: %v, want ErrTooMany", most+1, err)
	}
}
