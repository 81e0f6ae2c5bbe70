package raftpeer

import (
	"fmt"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"

	"chute/gossip/peer/peerpb"
)

// msgpackHandle returns the handle raft's NetworkTransport encodes with:
// time.Time in the old format, which every go-msgpack v2 decoder reads.
func msgpackHandle() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.TimeNotBuiltin = true
	return h
}

// encode returns v in msgpack; the slice is the caller's.
func (t *Transport) encode(v any) ([]byte, error) {
	var b []byte
	if err := codec.NewEncoderBytes(&b, t.mh).Encode(v); err != nil {
		return nil, fmt.Errorf("raftpeer: encode %T: %w", v, err)
	}
	return b, nil
}

// encodeRequest encodes a request to send, refused locally when the peer
// would refuse it for its size.
func (t *Transport) encodeRequest(v any) ([]byte, error) {
	b, err := t.encode(v)
	if err != nil {
		return nil, err
	}
	if len(b) > t.cfg.MaxMessageBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrMessageTooLarge, len(b), t.cfg.MaxMessageBytes)
	}
	return b, nil
}

// decode fills v from msgpack. The decoder copies what it keeps, so b
// may be reused after.
func (t *Transport) decode(b []byte, v any) error {
	if err := codec.NewDecoderBytes(b, t.mh).Decode(v); err != nil {
		return fmt.Errorf("%w: %T: %v", ErrMalformed, v, err)
	}
	return nil
}

// decodeRequest checks the size of a received request and decodes it into
// v; an AppendEntries is also checked for its number of entries, counted
// before any entry is made.
func (t *Transport) decodeRequest(b []byte, v any) error {
	if len(b) > t.cfg.MaxMessageBytes {
		return fmt.Errorf("%w: %d bytes, more than %d", ErrMessageTooLarge, len(b), t.cfg.MaxMessageBytes)
	}
	if _, ok := v.(*raft.AppendEntriesRequest); ok {
		if err := t.countEntries(b); err != nil {
			return err
		}
	}
	if err := t.decode(b, v); err != nil {
		return err
	}
	return checkRequest(v)
}

// entryCount is an AppendEntries with its entries decoded to nothing:
// the decoder skips each one and a slice of empty structs takes no
// memory, so however many there are, counting them costs no more than
// reading the bytes.
type entryCount struct {
	Entries []struct{}
}

// countEntries refuses an AppendEntries carrying more than MaxEntries
// entries before the real decode makes them. An empty entry is one byte
// of msgpack and about 160 bytes decoded, so checking after the decode
// let one 64 MiB request make some 10 GiB.
func (t *Transport) countEntries(b []byte) error {
	var c entryCount
	if err := t.decode(b, &c); err != nil {
		return err
	}
	if len(c.Entries) > t.cfg.MaxEntries {
		return fmt.Errorf("%w: %d, more than %d", ErrTooManyEntries, len(c.Entries), t.cfg.MaxEntries)
	}
	return nil
}

// checkRequest refuses what hashicorp/raft panics on instead of refusing:
// a null entry, a configuration it cannot decode (in an entry or in a
// snapshot), and the peer changes of before configurations, which no
// member of chute writes. One such request from a member, or
// from anyone reaching a peer port without peer certificates or a gossip
// key, took the process down; a peer is trusted to be a member, not to
// be correct.
func checkRequest(v any) error {
	switch r := v.(type) {
	case *raft.AppendEntriesRequest:
		for i, e := range r.Entries {
			switch {
			case e == nil:
				return fmt.Errorf("%w: entry %d is null", ErrMalformed, i)
			case e.Type == raft.LogAddPeerDeprecated || e.Type == raft.LogRemovePeerDeprecated:
				return fmt.Errorf("%w: entry %d: a peer change of before configurations", ErrMalformed, i)
			case e.Type == raft.LogConfiguration:
				if err := tryConfiguration(e.Data); err != nil {
					return fmt.Errorf("%w: entry %d: %v", ErrMalformed, i, err)
				}
			}
		}
	case *raft.InstallSnapshotRequest:
		// Version 0 carries peers, which raft decodes with an error.
		if r.SnapshotVersion > 0 {
			if err := tryConfiguration(r.Configuration); err != nil {
				return fmt.Errorf("%w: snapshot: %v", ErrMalformed, err)
			}
		}
	}
	return nil
}

// tryConfiguration decodes a configuration as raft will, and returns the
// panic raft.DecodeConfiguration raises on bad bytes as an error.
func tryConfiguration(b []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("configuration: %v", p)
		}
	}()
	raft.DecodeConfiguration(b)
	return nil
}

// decodeResponse fills resp from a peer's answer and returns the error the
// peer's raft answered with, wrapped in ErrRemote.
func (t *Transport) decodeResponse(out *peerpb.RaftResponse, resp any) error {
	if len(out.Msgpack) > 0 {
		if err := t.decode(out.Msgpack, resp); err != nil {
			return err
		}
	}
	if out.Error != "" {
		return fmt.Errorf("%w: %s", ErrRemote, out.Error)
	}
	return nil
}

// encodeResponse turns raft's answer into a message.
func (t *Transport) encodeResponse(r raft.RPCResponse) (*peerpb.RaftResponse, error) {
	out := &peerpb.RaftResponse{}
	if r.Response != nil {
		b, err := t.encode(r.Response)
		if err != nil {
			return nil, err
		}
		out.Msgpack = b
	}
	if r.Error != nil {
		out.Error = r.Error.Error()
	}
	return out, nil
}
