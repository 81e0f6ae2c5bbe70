package dispatch

import (
	"strconv"
	"strings"
)

// KeyKind is what a key of the queue namespace names.
type KeyKind int

const (
	// KindNone is a key outside the queue namespace: plain KV.
	KindNone KeyKind = iota
	// KindRecord is /q/{name}: the queue's dispatcher record (plain KV).
	KindRecord
	// KindProduce is /q/{name}/p/{key} (also producer, i, input): a put is
	// a message.
	KindProduce
	// KindConsumer is /q/{name}/c/{id} (also consumer): a watch consumes.
	KindConsumer
	// KindDelivery is /q/{name}/{seq}/{key} or /q/{name}/c/{id}/{seq}/{key}:
	// a delete acknowledges.
	KindDelivery
	// KindDeadLetter is /q/{name}/dlq/{seq}: a refused row (plain KV).
	KindDeadLetter
	// KindInvalid is any other key under /q/{name}/.
	KindInvalid
)

// Key is a parsed key of the queue namespace. Prefix is the spelling the
// client used ("q" or "queue"); both name the same queue.
type Key struct {
	Kind     KeyKind
	Prefix   string
	Queue    string
	Tail     string // the producer's {key}, for produce and delivery keys
	Consumer string // the consumer id, for consumer keys and their deliveries
	Seq      uint64 // for delivery and dead-letter keys
}

// ParseKey parses a key. Keys outside /q/ and /queue/, and /q/ itself,
// are KindNone; {name}, {key} and {id} are each exactly one non-empty
// segment. A key with an empty {name} (/q//...) is KindInvalid, except
// /q//p/{key}, which is KindProduce with an empty Queue, so that a put
// to it is refused saying the name is empty (checkQueueName).
func ParseKey(key string) Key {
	// Most keys are plain KV: tell them apart without allocating, as kv
	// asks for every key of every request.
	if !strings.HasPrefix(key, "/q/") && !strings.HasPrefix(key, "/queue/") {
		return Key{Kind: KindNone}
	}
	// Split into at most maxSegments on the stack: every put's key is
	// parsed. A key with more is no queue key of any kind.
	var buf [maxSegments]string
	segs, more := buf[:0], key
	for len(segs) < maxSegments {
		i := strings.IndexByte(more, '/')
		if i < 0 {
			segs = append(segs, more)
			more = ""
			break
		}
		segs = append(segs, more[:i])
		more = more[i+1:]
	}
	tooMany := len(segs) == maxSegments
	if len(segs) < 3 || segs[0] != "" || (segs[1] != "q" && segs[1] != "queue") {
		return Key{Kind: KindNone}
	}
	if segs[2] == "" {
		// /q/ itself is a plain key. Under it, an empty queue name is
		// refused: as a producer key, so that the put says why.
		switch {
		case len(segs) == 3:
			return Key{Kind: KindNone}
		case len(segs) == 5 && isProducer(segs[3]) && segs[4] != "":
			return Key{Kind: KindProduce, Prefix: segs[1], Tail: segs[4]}
		}
		return Key{Kind: KindInvalid, Prefix: segs[1]}
	}
	k := Key{Kind: KindInvalid, Prefix: segs[1], Queue: segs[2]}
	if tooMany {
		return k
	}
	rest := segs[3:]
	for _, s := range rest {
		if s == "" {
			return k
		}
	}
	switch {
	case len(rest) == 0:
		k.Kind = KindRecord
	case len(rest) == 2 && isProducer(rest[0]):
		k.Kind, k.Tail = KindProduce, rest[1]
	case len(rest) == 2 && isConsumer(rest[0]):
		k.Kind, k.Consumer = KindConsumer, rest[1]
	case len(rest) == 4 && isConsumer(rest[0]):
		if seq, ok := parseSeq(rest[2]); ok {
			k.Kind, k.Consumer, k.Seq, k.Tail = KindDelivery, rest[1], seq, rest[3]
		}
	case len(rest) == 2 && rest[0] == "dlq":
		if seq, ok := parseSeq(rest[1]); ok {
			k.Kind, k.Seq = KindDeadLetter, seq
		}
	case len(rest) == 2:
		if seq, ok := parseSeq(rest[0]); ok {
			k.Kind, k.Seq, k.Tail = KindDelivery, seq, rest[1]
		}
	}
	return k
}

// maxSegments bounds the "/"-separated segments ParseKey looks at: the
// longest queue key, /q/{name}/c/{id}/{seq}/{key}, has 7 ("" first).
const maxSegments = 8

func isProducer(s string) bool { return s == "p" || s == "producer" || s == "i" || s == "input" }

func isConsumer(s string) bool { return s == "c" || s == "consumer" }

// parseSeq accepts a positive decimal without sign or leading zeros, so
// that one message has one delivery key.
func parseSeq(s string) (uint64, bool) {
	if s == "" || s[0] < '1' || s[0] > '9' {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// DeliveryKey returns the key a message is delivered under, in the
// consumer's spelling.
func DeliveryKey(prefix, queue string, seq uint64, tail string) string {
	return "/" + prefix + "/" + queue + "/" + strconv.FormatUint(seq, 10) + "/" + tail
}

// RecordKey returns the dispatcher record key of a queue. The record is
// always spelled /q/, whatever spelling its users chose, so that there is
// one record per queue.
func RecordKey(queue string) string { return "/q/" + queue }

// DeadLetterKey returns the key of a dead letter.
func DeadLetterKey(queue string, seq uint64) string {
	return "/q/" + queue + "/dlq/" + strconv.FormatUint(seq, 10)
}
