// Package dispatch owns queues: the /q/ and /queue/ key grammar (key.go),
// dispatcher records and election (record.go, election.go), the in-memory
// queue each dispatcher holds (queue.go), forwarding puts to the dispatcher
// (forward.go), holding copies while it is unreachable and handing
// everything to a new one (reconcile.go), consumers local and remote
// (consumers.go) and the peer service those use (peer.go). kv calls it
// through kv.Queues, so kv never imports dispatch.
//
// # Keys
//
//	/q/{name}                         dispatcher record "<member>;epoch=<n>" (KV)
//	/q/{name}/c/{id}                  consumer: watch it; its KV value names the member hosting it
//	/q/{name}/p/{key}                 produce (also producer, i, input)
//	/q/{name}/{seq}/{key}             delivery key: delete = acknowledge
//	/q/{name}/dlq/{seq}               dead letter (KV)
//
// /queue/ is the same namespace; deliveries are spelled as the consumer
// spelled its key. Any other key under /q/{name}/ is InvalidArgument.
//
// # Dispatchers
//
// Every queue has one dispatcher, named by its record, which holds its
// messages in memory and delivers them. A producer's member claims a queue
// nobody alive dispatches (epoch+1); a consumer's member claims a queue
// whose dispatcher hosts no consumer, so deliveries stay local. A claim is
// a compare-and-put of the record on the claiming member, replicated like
// any key: of two concurrent claims the later stamp wins everywhere (last
// writer wins), and the loser hands over what it holds. (DESIGN §4 asks
// for "higher epoch, then earlier stamp"; with causally ordered claims the
// higher epoch always carries the later stamp, and for concurrent claims
// any deterministic winner converges, so the KV's rule is used as it is.)
//
// A non-dispatcher forwards puts over one long-lived, pipelined stream per
// dispatcher and answers the producer once the dispatcher holds them. When
// the dispatcher cannot be reached, the put is held by every alive member
// under its cluster-unique id; the reconcile loop hands held copies to the
// dispatcher elected next, which keeps one per id.
//
// Message numbers are per dispatcher epoch: epoch e numbers from
// (e-1)<<32 + 1, and handed-over messages keep their numbers, so an
// acknowledgement never removes another epoch's message. Acknowledgements
// go to the dispatcher.
//
// # Guarantees and limits
//
// Delivery is at least once: a message is redelivered when its consumer
// goes or it stays unacknowledged past the visibility timeout, and when a
// dispatcher hands over messages its consumers had not acknowledged. A
// dispatcher's messages live in its memory: a dispatcher that dies loses
// the messages it held (the acknowledgement modes of issue 7 lift this);
// copies held during an outage are not lost. Order is kept per producer
// connection through handovers. A txn producing to several queues with
// different dispatchers is atomic per queue only.
//
// Locks: Manager.mu and queue.mu are never held together; queue.handoverMu
// is taken before queue.mu.
// queue.mu may be held while calling kv.Deliveries (which never blocks) and
// while reading the KV.
package dispatch
