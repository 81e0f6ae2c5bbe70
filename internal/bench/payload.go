package bench

import (
	"math/rand/v2"
	"strconv"
)

// alphabet is what random key padding, values and run ids are made of:
// printable, and safe in keys, logs and JSON.
const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// runIDAlphabet keeps run ids lower case, like the rest of a key.
const runIDAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// valueSlack is how many distinct values a payload can slice out of its
// buffer, so consecutive puts do not send the same bytes.
const valueSlack = 64

// payload makes the keys and values of one putter. It is not safe for
// concurrent use: each putter owns one.
type payload struct {
	prefix  string
	keySize int
	valSize int
	rnd     *rand.Rand
	key     []byte // reused buffer for building keys
	vals    []byte // valSize+valueSlack random printable bytes
}

func newPayload(prefix string, keySize, valSize int, seed uint64) *payload {
	p := &payload{
		prefix:  prefix,
		keySize: keySize,
		valSize: valSize,
		rnd:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		key:     make([]byte, 0, max(keySize, len(prefix)+16)),
	}
	p.vals = make([]byte, valSize+valueSlack)
	p.fill(p.vals)
	return p
}

// keyFor returns the key of put number n: prefix, n in base 36, then random
// printable padding up to keySize. Distinct n give distinct keys.
func (p *payload) keyFor(n int64) string {
	k := append(p.key[:0], p.prefix...)
	k = strconv.AppendInt(k, n, 36)
	if pad := p.keySize - len(k); pad > 0 {
		k = append(k, make([]byte, pad)...)
		p.fill(k[len(k)-pad:])
	}
	p.key = k
	return string(k)
}

// valueFor returns a valSize value for put number n.
func (p *payload) valueFor(n int64) string {
	off := int(n % valueSlack)
	return string(p.vals[off : off+p.valSize])
}

func (p *payload) fill(b []byte) {
	for i := range b {
		b[i] = alphabet[p.rnd.IntN(len(alphabet))]
	}
}

// newRunID returns a short random identifier that keeps the keys of one run
// apart from those of other runs.
func newRunID() string {
	b := make([]byte, 4)
	for i := range b {
		b[i] = runIDAlphabet[rand.IntN(len(runIDAlphabet))]
	}
	return string(b)
}
