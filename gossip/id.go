package gossip

import (
	"hash/fnv"
	"log/slog"
)

// MemberID is the member id of the node called name: the FNV-1a 64-bit hash
// of the name, so a node keeps its id across restarts and every node
// computes the same id for it. Zero, which etcd clients read as "no
// member", is never returned.
func MemberID(name string) uint64 {
	return nonZeroHash("member\x00" + name)
}

// ClusterID is the id of the cluster called name, computed as MemberID is.
func ClusterID(name string) uint64 {
	return nonZeroHash("cluster\x00" + name)
}

func nonZeroHash(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	if v := h.Sum64(); v != 0 {
		return v
	}
	return 1
}

// ID is a member or cluster id as chute shows it to people: 16 lowercase
// hex digits, zero-padded ("%016x"), as etcdctl prints member ids. Every
// log field, span attribute, error text and /status field that names a
// member uses it, so one member reads the same everywhere. As a slog
// value it logs as that text.
type ID uint64

// String returns the id as 16 hex digits.
func (id ID) String() string {
	const digits = "0123456789abcdef"
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = digits[id&0xf]
		id >>= 4
	}
	return string(b[:])
}

// LogValue implements slog.LogValuer.
func (id ID) LogValue() slog.Value { return slog.StringValue(id.String()) }
