package gossip

import "hash/fnv"

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
