package dispatch

import (
	"context"
	"encoding/binary"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"chute/gossip"
	"chute/gossip/peer/peerpb"
)

// While a dispatcher is unreachable from one member but not from another
// (a partial partition: gossip calls it alive), the puts made on the
// first are held as copies there and on every other member; the others
// hand theirs to the dispatcher at their next round. Each that does then
// tells the members (Taken) that the dispatcher took those messages, and
// they drop their copies of them. Kept until their own link was back,
// the copies reached the dispatcher after it had forgotten their ids (it
// remembers the last doneIDs acknowledged), or reached the next
// dispatcher should it fail meanwhile, and were delivered again.

// takenBlockBytes is the size of one block of ids in a Taken call: its
// origin, N/64 and the bitmap of the 64 ids from N/64*64.
const takenBlockBytes = 24

// maxTakenBlocks bounds the blocks of one Taken call (384 KiB); a
// member names more in several calls.
const maxTakenBlocks = 1 << 14

// tellTaken tells every other alive member but dispatcher that
// dispatcher took msgs, handed over by this member, in the background:
// copies of the puts among them held there are dropped. A call lost
// leaves those copies until their hand-over, as before.
func (m *Manager) tellTaken(name string, dispatcher uint64, msgs []incoming) {
	if m.cluster == nil {
		return
	}
	ids := newDoneSet(len(msgs) + 1) // one generation: every id kept
	for _, in := range msgs {
		if in.seq == 0 && in.owner == nil { // a put, not a numbered message or a backup's copy
			ids.add(in.id)
		}
	}
	blocks := ids.blocks(nil)
	if len(blocks) == 0 {
		return
	}
	var peers []gossip.Peer
	for _, p := range m.cluster.Peers() {
		if p.ID != dispatcher && p.ID != m.cfg.MemberID {
			peers = append(peers, p)
		}
	}
	if len(peers) == 0 {
		return
	}
	var calls []*peerpb.TakenRequest
	for i := 0; i < len(blocks); i += 3 * maxTakenBlocks {
		part := blocks[i:min(len(blocks), i+3*maxTakenBlocks)]
		b := make([]byte, 0, len(part)*8)
		for _, v := range part {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
		calls = append(calls, &peerpb.TakenRequest{Queue: name, Blocks: b})
	}
	select {
	case <-m.stop:
		return
	default:
	}
	for _, p := range peers { // each on its own: a frozen member does not hold up the others
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), forwardTimeout)
			defer cancel()
			go func() {
				select {
				case <-m.stop: // a member stopping does not wait for a slow peer
					cancel()
				case <-ctx.Done():
				}
			}()
			conn, err := m.conn(p.Addr)
			if err != nil {
				return
			}
			for _, r := range calls {
				if _, err := peerpb.NewQueuesClient(conn).Taken(m.outgoing(ctx), r); err != nil {
					m.log.Debug("telling a member the dispatcher took the copies it holds", "queue", name, "peer", gossip.ID(p.ID), "err", err)
					return
				}
			}
		}()
	}
}

// Taken drops the copies of a queue this member holds whose messages
// the dispatcher took from the caller's hand-over.
func (s *queueService) Taken(_ context.Context, r *peerpb.TakenRequest) (*peerpb.TakenResponse, error) {
	if !validQueueName(r.Queue) || len(r.Blocks)%takenBlockBytes != 0 || len(r.Blocks) > maxTakenBlocks*takenBlockBytes {
		return nil, status.Errorf(codes.InvalidArgument, "dispatch: a Taken call needs a valid queue name and at most %d blocks of %d bytes", maxTakenBlocks, takenBlockBytes)
	}
	for b := r.Blocks; len(b) > 0; b = b[takenBlockBytes:] {
		if binary.LittleEndian.Uint64(b[8:]) >= 1<<58 {
			return nil, status.Error(codes.InvalidArgument, "dispatch: a Taken call names an id past 2^64")
		}
	}
	q := s.m.lookup(r.Queue)
	if q == nil {
		return &peerpb.TakenResponse{}, nil
	}
	ids := newDoneSet(len(r.Blocks) / takenBlockBytes * 64) // one generation: the call's ids kept whole
	for b := r.Blocks; len(b) > 0; b = b[takenBlockBytes:] {
		ids.addBlock(binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:]), binary.LittleEndian.Uint64(b[16:]))
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.takenLocked(ids)
	return &peerpb.TakenResponse{}, nil
}

// takenLocked drops the held copies of ids, which a dispatcher took from
// another member, and those out for a hand-over should they come back.
// The caller holds mu.
func (q *queue) takenLocked(ids *doneSet) {
	q.dropHeldLocked(func(in *incoming) bool { return ids.has(in.id) })
	if q.handing > 0 {
		if len(q.taken) == maxReturning {
			q.taken = slices.Delete(q.taken, 0, 1)
		}
		q.taken = append(q.taken, ids)
	}
}
