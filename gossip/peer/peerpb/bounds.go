package peerpb

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// MaxProposeCommands bounds the commands of one ProposeRequest: the most a
// member forwards to the leader in one call (kv/raftkv's batches).
const MaxProposeCommands = 512

// ErrTooMany is wrapped by the error of a message whose bounded repeated
// field (Counted) holds more elements than its bound.
var ErrTooMany = errors.New("peerpb: more elements than the bound")

// Counted is a message whose repeated field is counted, against its
// bound, before it is decoded: an element of two bytes on the wire (an
// empty message or command) is one of 24 to 200 in memory, so a call
// within the peer link's 64 MiB made gigabytes before the receiver's own
// bound looked at it, as a ForwardFrame did (MaxBatchMessages).
type Counted interface {
	CountedField() (field protowire.Number, most int)
}

// CountedField implements Counted: a Hold holds at most MaxBatchMessages
// messages.
func (*HoldRequest) CountedField() (protowire.Number, int) { return 1, MaxBatchMessages }

// CountedField implements Counted: a Propose holds at most
// MaxProposeCommands commands.
func (*ProposeRequest) CountedField() (protowire.Number, int) { return 1, MaxProposeCommands }

// CheckCount counts the fields numbered field of b, a message's wire form,
// and returns an error wrapping ErrTooMany when there are more than most;
// an error too when b does not parse, which the decode would refuse.
func CheckCount(b []byte, field protowire.Number, most int) error {
	n := 0
	for len(b) > 0 {
		num, typ, k := protowire.ConsumeTag(b)
		if k < 0 {
			return protowire.ParseError(k)
		}
		b = b[k:]
		if k = protowire.ConsumeFieldValue(num, typ, b); k < 0 {
			return protowire.ParseError(k)
		}
		b = b[k:]
		if num == field {
			if n++; n > most {
				return fmt.Errorf("%w: more than %d of field %d", ErrTooMany, most, field)
			}
		}
	}
	return nil
}
