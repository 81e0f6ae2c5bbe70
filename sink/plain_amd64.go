package sink

// plainPrefix returns how many of the bytes at the start of v a JSON
// string takes as they are (0x20 to 0x7f but '"' and '\\'), counted 16
// at a time: it stops at the first other byte, or where fewer than 16
// bytes are left. In assembly (plain_amd64.s): SSE2 reads 16 bytes in
// the instructions stringBytes spends on 8, and most of a row's bytes
// are the inside of its strings.
//
//go:noescape
func plainPrefix(v []byte) int

// plainPrefixCounts: plainPrefix counts, as its doc says (the tests
// hold it to that).
const plainPrefixCounts = true
