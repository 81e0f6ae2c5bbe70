package dispatch

import (
	"strconv"
	"strings"
)

// Record is a queue's dispatcher record, the value of /q/{name}:
// "<member-id>;epoch=<n>[;reply_to=<queue>][;pinned]". Unknown fields
// are ignored so that newer nodes can add some.
//
// The member id is decimal, unlike the 16 hex digits of gossip.ID that
// logs and /status show: the record is data every member of the cluster
// parses, whatever its version, and operators and tools read and write
// it. A member of an earlier version would find no valid record in a hex
// id and claim the queue; and reading both forms cannot tell a 16-digit
// decimal id from a hex id without letters. A hex id can come as a new
// field once every member reads it.
type Record struct {
	Member  uint64
	Epoch   uint64
	ReplyTo string
	Pinned  bool
	// From is the member that dispatched the queue before this epoch,
	// while its hand-over may be under way (";from=<id>"): the new
	// dispatcher delivers nothing until that member says it is done
	// (awaitPrevious), then writes the record without it. 0: none.
	From uint64
}

// movedTo returns the record of the queue dispatched by member in epoch,
// keeping r's reply_to and pinned: a claim or a handover changes who
// dispatches, not what the record says of the queue. It names r's member
// as the one it comes from, or, claimed again by that member, the one r
// came from.
func (r Record) movedTo(member, epoch uint64) Record {
	next := Record{Member: member, Epoch: epoch, ReplyTo: r.ReplyTo, Pinned: r.Pinned, From: r.From}
	if r.Member != member {
		next.From = r.Member
	}
	return next
}

// ParseRecord parses a record; ok is false when the member id is missing,
// zero or not a number, or the epoch is not a number up to maxEpoch (the
// last epoch that numbers messages), so no epoch read can wrap.
// Every put reads its queue's record: parsing allocates nothing.
func ParseRecord(s string) (r Record, ok bool) {
	first, rest, _ := strings.Cut(s, ";")
	id, err := strconv.ParseUint(strings.TrimSpace(first), 10, 64)
	if err != nil || id == 0 {
		return Record{}, false
	}
	r.Member = id
	for rest != "" {
		var f string
		f, rest, _ = strings.Cut(rest, ";")
		k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
		switch k {
		case "epoch":
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil || n > maxEpoch {
				return Record{}, false // an epoch claims could not go past
			}
			r.Epoch = n
		case "reply_to":
			r.ReplyTo = strings.Clone(v) // s does not escape: string(b) callers need not allocate
		case "pinned":
			r.Pinned = true
		case "from":
			if n, err := strconv.ParseUint(v, 10, 64); err == nil {
				r.From = n // anything else: no member to wait for
			}
		}
	}
	return r, true
}

// String renders the record; ParseRecord(r.String()) == r.
func (r Record) String() string {
	var b strings.Builder
	b.WriteString(strconv.FormatUint(r.Member, 10))
	b.WriteString(";epoch=")
	b.WriteString(strconv.FormatUint(r.Epoch, 10))
	if r.ReplyTo != "" {
		b.WriteString(";reply_to=")
		b.WriteString(r.ReplyTo)
	}
	if r.Pinned {
		b.WriteString(";pinned")
	}
	if r.From != 0 {
		b.WriteString(";from=")
		b.WriteString(strconv.FormatUint(r.From, 10))
	}
	return b.String()
}
