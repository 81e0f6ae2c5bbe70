package peerpb

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// MaxProposeCommands bounds the commands of one ProposeRequest: the most a
// member forwards to the leader in one call (kv/raftkv's batches).
const MaxProposeCommands = 512

// MaxStatusQueues and MaxStatusBackups bound the queues and the backups
// of one StatusResponse: a member lists at most so many and counts the
// others (dispatch's status of the cluster).
const (
	MaxStatusQueues  = 10000
	MaxStatusBackups = 10000
)

// ErrTooMany is wrapped by the error of a message whose bounded repeated
// field (Counted) holds more elements than its bound.
var ErrTooMany = errors.New("peerpb: more elements than the bound")

// Counted is a message whose repeated field is counted, against its
// bound, before it is decoded: an element of two bytes on the wire (an
// empty message or command) is one of 24 to 200 in memory, so a call
// within the peer link's 64 MiB made gigabytes before the receiver's own
// bound looked at it, as a ForwardFrame did (MaxBatchMessages).
type Counted interface {
	CountedFields() []Bound
}

// Bound is the most elements a repeated field of a message may hold.
type Bound struct {
	Field protowire.Number
	Most  int
}

// CountedFields implements Counted: a Hold holds at most MaxBatchMessages
// messages.
func (*HoldRequest) CountedFields() []Bound { return []Bound{{1, MaxBatchMessages}} }

// CountedFields implements Counted: a Propose holds at most
// MaxProposeCommands commands.
func (*ProposeRequest) CountedFields() []Bound { return []Bound{{1, MaxProposeCommands}} }

// CountedFields implements Counted: a member's status lists at most
// MaxStatusQueues queues and MaxStatusBackups backups, as the asking
// member reads it.
func (*StatusResponse) CountedFields() []Bound {
	return []Bound{{1, MaxStatusQueues}, {2, MaxStatusBackups}}
}

// CheckCount counts the fields of b, a message's wire form, that bounds
// name, and returns an error wrapping ErrTooMany when one has more than
// its bound; an error too when b does not parse, which the decode would
// refuse.
func CheckCount(b []byte, bounds []Bound) error {
	var n [4]int // by index of bounds; a message has few bounded fields
	if len(bounds) > len(n) {
		return fmt.Errorf("peerpb: %d bounded fields, at most %d", len(bounds), len(n))
	}
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
		for i, bd := range bounds {
			if num == bd.Field {
				if n[i]++; n[i] > bd.Most {
					return fmt.Errorf("%w: more than %d of field %d", ErrTooMany, bd.Most, bd.Field)
				}
			}
		}
	}
	return nil
}
