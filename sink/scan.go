package sink

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

// validObject reports whether v is one JSON object with nothing but white
// space around it, as encoding/json.Valid would judge the same bytes, and
// valid UTF-8 (encoding/json accepts any byte from 0x20 up inside strings;
// this scanner refuses what is not UTF-8 there). It nests at most maxDepth
// deep. It reads v once and allocates nothing for
// rows nested up to 32 deep: every put to a ClickHouse queue is checked, and
// encoding/json's scanner stood out in profiles of batch produce
// (docs/benchmarks.md).
func validObject(v []byte) bool {
	i := skipSpace(v, 0)
	if i == len(v) || v[i] != '{' {
		return false
	}
	var small [32]byte
	stack := small[:0] // '{' or '[' per open container
	for {
		// At the start of a value.
		if i >= len(v) {
			return false
		}
		switch c := v[i]; {
		case c == '{' || c == '[':
			if len(stack) >= maxDepth {
				return false
			}
			stack = append(stack, c)
			i = skipSpace(v, i+1)
			if i < len(v) && (c == '{' && v[i] == '}' || c == '[' && v[i] == ']') {
				stack = stack[:len(stack)-1]
				i++
				break // an empty container is a whole value
			}
			if c == '{' {
				if i = objectKey(v, i); i < 0 {
					return false
				}
			}
			continue
		case c == '"':
			if i = stringEnd(v, i); i < 0 {
				return false
			}
		case c == '-' || '0' <= c && c <= '9':
			if i = numberEnd(v, i); i < 0 {
				return false
			}
		case c == 't':
			if i = literalEnd(v, i, "true"); i < 0 {
				return false
			}
		case c == 'f':
			if i = literalEnd(v, i, "false"); i < 0 {
				return false
			}
		case c == 'n':
			if i = literalEnd(v, i, "null"); i < 0 {
				return false
			}
		default:
			return false
		}
		// After a value: a comma, or the end of containers.
		for {
			i = skipSpace(v, i)
			if len(stack) == 0 {
				return i == len(v)
			}
			if i >= len(v) {
				return false
			}
			top := stack[len(stack)-1]
			switch {
			case v[i] == ',':
				i = skipSpace(v, i+1)
				if top == '{' {
					if i = objectKey(v, i); i < 0 {
						return false
					}
				}
			case top == '{' && v[i] == '}' || top == '[' && v[i] == ']':
				stack = stack[:len(stack)-1]
				i++
				continue
			default:
				return false
			}
			break
		}
	}
}

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

// objectKey reads `"key" :` and the space after it, from i; -1 when it is
// not there.
func objectKey(v []byte, i int) int {
	if i >= len(v) || v[i] != '"' {
		return -1
	}
	if i = stringEnd(v, i); i < 0 {
		return -1
	}
	i = skipSpace(v, i)
	if i >= len(v) || v[i] != ':' {
		return -1
	}
	return skipSpace(v, i+1)
}

func skipSpace(v []byte, i int) int {
	for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == '\n' || v[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index after the string starting at v[i] == '"',
// -1 when it is malformed or not UTF-8.
func stringEnd(v []byte, i int) int {
	for i++; i < len(v); i++ {
		// Eight plain bytes at a time, then byte by byte from the first
		// that may not be. Past eight plain ones the string is a long
		// one: sixteen at a time where the CPU can (plainPrefix, whose
		// call would cost the short ones more than it saves).
		for i+8 <= len(v) {
			if m := stringBytes(binary.LittleEndian.Uint64(v[i:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
			i += plainPrefix(v[i:])
		}
		if i >= len(v) {
			break
		}
		c := v[i]
		if 0x20 <= c && c < utf8.RuneSelf && c != '"' && c != '\\' {
			continue // most bytes of most rows
		}
		switch {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(v[i:])
			if r == utf8.RuneError && size == 1 {
				return -1
			}
			i += size - 1
		case c == '\\':
			i++
			if i >= len(v) {
				return -1
			}
			switch v[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(v) {
					return -1
				}
				for _, h := range v[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return -1
					}
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

// stringBytes marks, with its top bit, each byte of w that stringEnd
// must look at: '"', '\\', below 0x20, or not ASCII. Each test is the
// "has a zero byte" trick, x-0x01… &^ x & 0x80…, which can mark a plain
// byte only after one it rightly marked: the lowest mark (the first of
// the eight bytes, little-endian) is always right, and 0 means none.
func stringBytes(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote, backslash := w^(ones*'"'), w^(ones*'\\')
	control := (w - ones*0x20) &^ w
	return (control | (quote-ones)&^quote | (backslash-ones)&^backslash | w) & highs
}

// numberEnd returns the index after the number starting at v[i], -1 when
// it is malformed: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func numberEnd(v []byte, i int) int {
	if v[i] == '-' {
		i++
	}
	switch {
	case i < len(v) && v[i] == '0':
		i++
	case i < len(v) && '1' <= v[i] && v[i] <= '9':
		i = digits(v, i)
	default:
		return -1
	}
	if i < len(v) && v[i] == '.' {
		j := digits(v, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(v) && (v[i] == 'e' || v[i] == 'E') {
		i++
		if i < len(v) && (v[i] == '+' || v[i] == '-') {
			i++
		}
		j := digits(v, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digits(v []byte, i int) int {
	for i < len(v) && '0' <= v[i] && v[i] <= '9' {
		i++
	}
	return i
}

func literalEnd(v []byte, i int, lit string) int {
	if len(v)-i < len(lit) || string(v[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// invalidUTF8 returns the offset of the first byte of v that does not
// start a valid UTF-8 sequence, -1 when v is all UTF-8.
func invalidUTF8(v []byte) int {
	for i := 0; i < len(v); {
		if v[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(v[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}
