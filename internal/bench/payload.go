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
	prefix  string   // of plain keys
	queues  []string // "/q/ch:<table>/p/" per table; empty: plain keys
	keySize int
	valSize int
	rnd     *rand.Rand
	key     []byte // reused buffer for building keys
	vals    []byte // valSize+valueSlack random printable bytes
	row     []byte // reused buffer for building JSON rows
}

func newPayload(cfg Config, seed uint64) *payload {
	p := &payload{
		prefix:  cfg.KeyPrefix,
		keySize: cfg.KeySize,
		valSize: cfg.ValSize,
		rnd:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
	for _, t := range cfg.Tables {
		p.queues = append(p.queues, queueKeyPrefix(t))
	}
	p.key = make([]byte, 0, max(cfg.KeySize, len(cfg.KeyPrefix)+16)+queuePrefixRoom)
	p.vals = make([]byte, cfg.ValSize+valueSlack)
	p.fill(p.vals)
	if len(p.queues) > 0 {
		p.row = make([]byte, 0, max(cfg.ValSize, rowOverhead+20))
	}
	return p
}

// queuePrefixRoom is room in the key buffer for "/q/ch:<table>/p/".
const queuePrefixRoom = 96

// queueKeyPrefix is what the keys of table's queue start with.
func queueKeyPrefix(table string) string {
	return "/q/" + queueName(table) + "/p/"
}

// queueName is the name of the queue whose rows go to table.
func queueName(table string) string {
	return "ch:" + table
}

// queueRecordKey is the key of the dispatcher record of table's queue.
func queueRecordKey(table string) string {
	return "/q/" + queueName(table)
}

// keyFor returns the key of put number n, to queue q%len(queues) with
// queues: prefix (a plain key's, or the queue's), n in base 36, then random
// printable padding up to keySize (of the plain key, or of the message key
// after the queue's prefix). Distinct n give distinct keys.
func (p *payload) keyFor(n int64, q int) string {
	k := p.key[:0]
	tail := 0
	if len(p.queues) > 0 {
		k = append(k, p.queues[q%len(p.queues)]...)
		tail = len(k)
	} else {
		k = append(k, p.prefix...)
	}
	k = strconv.AppendInt(k, n, 36)
	if pad := p.keySize - (len(k) - tail); pad > 0 {
		k = append(k, make([]byte, pad)...)
		p.fill(k[len(k)-pad:])
	}
	p.key = k
	return string(k)
}

// rowOverhead is the length of a JSON row without its id's digits and its
// padding: {"id":,"v":""}.
const rowOverhead = len(`{"id":,"v":""}`)

// valueFor returns the value of put number n: valSize random bytes, or
// with queues the JSON row {"id":n,"v":"<padding>"} of valSize bytes
// (longer when n alone does not fit).
func (p *payload) valueFor(n int64) string {
	off := int(n % valueSlack)
	if len(p.queues) == 0 {
		return string(p.vals[off : off+p.valSize])
	}
	return string(appendRow(p.row[:0], n, p.valSize, p.vals[off:]))
}

// appendRow appends the JSON row {"id":n,"v":"<pad>"} of size bytes to b,
// its padding taken from pad (printable, at least size bytes); the row is
// longer than size when n alone does not fit.
func appendRow(b []byte, n int64, size int, pad []byte) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, n, 10)
	b = append(b, `,"v":"`...)
	digits := len(strconv.AppendInt(nil, n, 10))
	if fill := size - rowOverhead - digits; fill > 0 {
		b = append(b, pad[:fill]...)
	}
	return append(b, `"}`...)
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

// runTables names q tables of one run: bench_<run>_0 .. bench_<run>_<q-1>.
func runTables(run string, q int) []string {
	out := make([]string, q)
	for i := range out {
		out[i] = "bench_" + run + "_" + strconv.Itoa(i)
	}
	return out
}
