// Package dispatch owns queues: the /q/ and /queue/ key grammar (key.go),
// dispatcher records and election (record.go, election.go), the queue
// each dispatcher holds (queue.go), the queue log that keeps on disk what
// the member holds (custody.go, over qlog), forwarding puts to the dispatcher
// (forward.go), holding copies while it is unreachable and handing
// everything to a new one (reconcile.go), consumers local and remote
// (consumers.go), the peer service those use (peer.go), ClickHouse
// drainers (drain.go) and the servers they share (servers.go), settings
// and ack modes (settings.go, ack.go,
// backup.go), the hand-off at shutdown (handoff.go), metrics and spans
// (metrics.go, tracing.go). kv calls it
// through kv.Queues, so kv never imports dispatch.
//
// # Keys
//
//	/q/{name}                         dispatcher record "<member>;epoch=<n>[;from=<member>]" (KV)
//	/q/{name}/c/{id}                  consumer: watch it; its KV value names the member hosting it
//	/q/{name}/p/{key}                 produce (also producer, i, input)
//	/q/{name}/{seq}/{key}             delivery key: delete = acknowledge (not of a ClickHouse queue: InvalidArgument)
//	/q/{name}/c/{id}/{seq}/{key}      the same, acknowledging only what is out to consumer {id}
//	/q/{name}/dlq/{seq}               dead letter (KV)
//	/config/queues/{name}             the queue's settings, JSON (KV, checked at put)
//
// /queue/ is the same namespace; deliveries are spelled as the consumer
// spelled its key. Any other key under /q/{name}/ is InvalidArgument.
//
// # What a put may name
//
// A put to /q//p/{key} (an empty name) is InvalidArgument. A put to a
// ClickHouse queue is InvalidArgument unless its name is ch:{table} or
// ch:{db}.{table} as sink.CheckQueue reads it, its table (the database
// from Config.ClickHouseTables, else Config.ClickHouse, when the name
// has none) is in Config.ClickHouseTables' list (sink.AllowList:
// --clickhouse-allow-tables, never ClickHouse's system databases unless
// named), and its value is one JSON object in UTF-8 (sink.ValidateRow).
// The first two are judged once per queue name and remembered while the
// list and the database stay the same (putcheck.go), so a reload
// applies to the next put. Each member checks its clients' puts; what
// members send each other is held to the key grammar and the values'
// rules (see What other members may send), not to this member's list.
//
// # Metrics by table
//
// The ClickHouse metrics (rows and bytes inserted, batches, retries,
// insert duration, dead letters) carry table="db.table", unquoted, for
// the first Config.MetricsMaxTables tables a member inserts into, and
// table="_other" for the rest, for the life of the process.
//
// # Dispatchers
//
// Every queue has one dispatcher, named by its record, which holds its
// messages (in memory, and in its queue log) and delivers them. A producer's member claims a queue
// nobody alive dispatches (epoch+1); a consumer's member claims a queue
// whose dispatcher hosts no consumer, so deliveries stay local. A claim is
// a compare-and-put of the record on the claiming member, replicated like
// any key: of two concurrent claims the later stamp wins everywhere (last
// writer wins), and the loser hands over what it holds. (A rule of its
// own, "higher epoch, then earlier stamp", is not needed: with causally
// ordered claims the higher epoch always carries the later stamp, and
// for concurrent claims any deterministic winner converges, so the KV's
// rule is used as it is.)
//
// A queue that holds nothing and was not used for a minute is forgotten:
// every member drops its state, and the dispatcher deletes its record
// (forget.go). The next put claims it again. Records naming this member
// of queues it holds nothing of (idle at a restart) are adopted, then
// forgotten the same way (adopt.go).
//
// A non-dispatcher forwards puts over one long-lived stream per
// dispatcher and answers the producer once the dispatcher holds them. At
// most one frame of a stream waits to be applied (the dispatcher counts
// them in its answers); puts that come meanwhile go together in the next
// frame, so a busy member makes few writes and the dispatcher few
// answers and fsyncs, while a lone put still goes at once. The
// dispatcher enqueues the batches of a frame that follow each other on
// one queue at once (one lock, one record lookup), and tries them one
// by one only when together they pass the queue's byte cap. When
// the dispatcher cannot be reached, the put is held by every alive member
// under its cluster-unique id; the reconcile loop hands held copies to the
// dispatcher elected next, which keeps one per id. A member that hands
// held puts to a dispatcher that answers tells the other members, without
// waiting (taken.go), and they drop their copies of them: one that cannot
// reach that dispatcher (a partial partition) no longer keeps them until
// its link is back, to bring them after the dispatcher forgot their ids.
//
// Keeping one per id costs two table lookups per message, so a queue looks
// up only what can be a second copy (queue.go, arrival): handed-over,
// held and backed-up messages always, and their origins are noted; a put
// forwarded by the member that made it only when copies from that member
// came before (its first copy can only be one it held after a forward of
// it failed, and that arrives as a copy); a put made on the dispatcher
// never. So the id index is filled from the queue at the first lookup,
// not at each put, and emptied with the queue (queue.indexLocked); the
// acknowledged ids are bitmaps of consecutive numbers per origin
// (doneSet), a member's counter giving a queue mostly runs of them.
// A forward waits at most five seconds for its answer; one sweep
// per stream every 100 ms ends the waits that passed it.
//
// Message numbers are per dispatcher epoch: epoch e numbers from
// (e-1)<<32 + 1, and handed-over messages keep their numbers, so an
// acknowledgement never removes another epoch's message. A member numbers
// only in an epoch whose record its running process wrote (mayNumber):
// restarted, or handed a queue, it claims the next epoch first, so no
// number an earlier run gave is given again. Acknowledgements
// go to the dispatcher. Two members claiming a queue at once both take
// the next epoch and number from its floor: the loser's handed-over
// messages whose numbers the winner gave already are renumbered, and when
// a consumer holds one under its old number, the next acknowledgement of
// that number and tail removes it rather than the winner's message with
// the number (queue.renamed): a wrong guess delivers the winner's again
// instead of losing it. An acknowledgement that reaches the winner before
// the handover does is still taken by the number it names.
//
// # Settings and acknowledgement modes
//
// /config/queues/{name} holds a queue's settings as JSON (settings.go):
// ack (queued, replicated, inserted), max_bytes, prefetch, visibility,
// batch_rows, batch_bytes, batch_interval, max_inserts_per_second,
// max_inflight_inserts, retry_min, retry_max, dlq_max_rows, dlq_ttl, and
// settings, the ClickHouse settings of the queue's inserts (numbers,
// strings, booleans as 1 or 0), which override Config.ClickHouseOptions'
// by name and are checked as sink.CheckSetting says. A put of
// a value that does not parse is InvalidArgument (kv asks Check); a stored
// change applies at the queue's next put or batch, or at the next
// reconcile round (100ms) for what neither touches.
//
//   - queued (default): the put returns once the message is in the
//     dispatcher's queue log (fsynced). A dispatcher killed keeps it for
//     its next start.
//   - replicated: the put returns once the dispatcher's backup also holds a
//     copy in its queue log (ack.go, backup.go). The backup is the next alive member after
//     the dispatcher in member-id order; a new backup gets a full copy
//     first; copies are released once acknowledged or inserted. When serf
//     reports the dispatcher failed or gone, the backup claims the queue
//     and queues the copies (numbers and ids kept) without waiting for a
//     put, or hands them to whoever claimed first. Duplicates after a kill
//     are bounded by what was inserted or acknowledged but not yet released
//     (about one ClickHouse batch). A member alone has no backup; one
//     whose other members all failed to keep copies lately fails the put
//     (Unavailable) rather than acknowledge it with no copy. A put to
//     another member that the dispatcher does not answer OK fails too
//     (the producer retries), rather than be held as copies: held copies
//     are no backup, and the dispatcher may hold the message alone.
//   - inserted (ClickHouse queues): the put returns once its rows are in
//     ClickHouse; a row ClickHouse refuses fails its put with
//     InvalidArgument naming the dead letter. A dispatcher that moves ends
//     the waits with Unavailable (the rows may still land: indeterminate).
//
// On SIGTERM (handoff.go) every queue this member dispatches is handed to
// its backup, or the next alive member, before serf Leave: the record
// moves first, the drainer finishes its inserts in flight, then the
// messages follow in order; then (or at once, for a queue whose messages
// were all acknowledged) the ids acknowledged here go to the new
// dispatcher (sendDone), and the backup is told to drop its copies, and
// answers before the member goes on (resetBackup): copies left there, of
// messages acknowledged whose releases had not gone yet, were taken over
// and delivered again once the member was gone. A queue nobody can take
// stays: its drainer inserts without waiting for its batch interval or
// insert rate until the shutdown deadline, and the rest stays in the queue
// log for the next start (Shutdown logs the rows per queue).
//
// # Batching
//
// A ClickHouse queue's drainer (drain.go) inserts its rows in batches of
// at most batch_rows and batch_bytes, oldest first. Every insert makes a
// ClickHouse part, so it paces a queue's insert starts:
//
//   - A batch starts at least batch_interval after the queue's previous
//     start.
//   - A batch that is not full also waits until 1/max_inserts_per_second
//     has passed since the previous start: a token bucket that holds one
//     token, back that long after each start, on Config.Clock. Rows that
//     come meanwhile join the batch, so load grows batches, not inserts:
//     over T seconds a queue that fills no batch starts at most
//     rate*T+1 inserts. The first row after a quiet spell finds the
//     token and goes at once: an idle queue's latency is one insert, a
//     busy one's at most the gap plus one insert. One token, not a deeper
//     bucket or a sliding window: either would let a burst of small
//     inserts through after every quiet spell.
//   - A full batch takes no token: it is as large as an insert should
//     be, and holding it back would make a queue that receives more than
//     caps*rate rows a second fall behind until max_bytes refuses puts.
//     Its start counts, so the batch after it waits the gap. The loop
//     reads the queue again for a held batch only when it may have
//     become full (by rows, by bytes at its rows' mean size, or doubled),
//     so waiting costs no scan per put.
//   - Up to max_inflight_inserts batches are in ClickHouse at once, each
//     on a goroutine the drainer's loop starts and waits for (stopDrainer
//     returns after all settled). Batches never share a row: a new batch
//     skips the numbers from the first to the last of every batch in
//     flight. Each keeps its rows, deduplication token, span, attempts,
//     backoff and failover; a retry is not a start. The drainer's
//     prefetch leaves room for every batch in flight and the next.
//   - Order: the rows of one insert are in number (put) order; two
//     inserts in flight may land in either order, and a retried batch
//     lands after batches formed after it.
//   - When the member leaves (Handoff), neither the interval nor the rate
//     holds a batch back.
//   - A batch waiting to retry when its drainer stops (a hand-over) may
//     have landed: its first row is marked with its row count
//     (queue.tried) and goes over with that mark
//     (peerpb.QueueMessage.Batch); the next dispatcher forms those rows,
//     in order, as one batch before anything else of theirs, so its dedup
//     token (rowsToken: the rows' ids) and its block are the first
//     attempt's, and a table that deduplicates drops it. It waits up to
//     triedWait for the rest of them, which come in chunks. Being a
//     retry, it is not a start: the batch after it does not wait the
//     interval or the rate's gap for it. The mark is
//     in the queue log too (recTried, "On disk"), so a restart after a
//     kill or a stop with nobody to hand the queue to forms the batch
//     again as well; and on the queue's backup (ack=replicated), which
//     gets a copy of the batch's first row carrying the mark before the
//     first attempt (markOnBackup, waiting up to markTimeout), so a
//     takeover after a kill forms it again too. A new backup gets the
//     marks of the batches in flight or waiting (queue.sent, queue.tried)
//     with its full copy (copyTo).
//
// # Dead letters
//
// A row ClickHouse refuses (sink.Bisect finds it) becomes a dead letter,
// /q/{name}/dlq/{seq}, JSON of the time, table, key, code, redacted
// error and row (dlq.go). Letters are ordinary keys users read and
// delete. Each queue keeps at most dlq_max_rows of them (default
// Config.DeadLetterMaxRows, 10000), deleting the oldest by number (as
// numbers: the keys sort as strings), and none older than dlq_ttl
// (Config.DeadLetterTTL, 168h; "0s" in a queue's settings: forever).
// Decisions:
//
//   - Each request of a bisection has an insert's bound of its own
//     (the queue's insert timeout, drainer.timed), however long the bisection: a deadline over
//     all of it would cut a request ClickHouse may still write, and its
//     rows would go in twice. The drainer stopping (a handover, a
//     shutdown) ends a bisection between two requests; what it had not
//     settled stays queued.
//   - The letters of one bisected batch and the deletions they cause are
//     one RecordStore.Apply (one raft entry), cut into writes of at most
//     1 MiB or 10000 ops: a write is not held to a client's 128 ops per
//     txn, and stays well under one raft command. A letter the write
//     would delete is not written.
//   - The drainer knows its queue's letter numbers, and reads them again
//     from the key space (Prefix) before it deletes any, so a user's
//     delete never makes it delete more than needed; nothing else is
//     trusted across users' writes.
//   - The sweep for dlq_ttl (and for a lowered dlq_max_rows) runs in the
//     drainer's goroutine once a minute on the manager's clock, asked by
//     the reconcile loop, and deletes at most 1000 letters of each kind a
//     round; it reads the time first in each letter without decoding the
//     row. A letter without a time (an older version's, a user's) never
//     expires. It runs only while the member dispatches the queue.
//   - Dropped letters count in chute.dead_letters.dropped {queue,reason}
//     and are logged at WARN at most once a minute per queue.
//   - A write that fails (a NOSPACE alarm, no leader, a timeout, the node
//     stopping) keeps its rows queued: they are refused and stored again
//     after a pause (once a NOSPACE alarm is disarmed).
//
// # On disk
//
// With Config.DataDir (cmd/chute always gives one; memory only is for unit
// tests), every message in a member's custody has a record in the queue
// log under <DataDir>/queues (custody.go): its kind (a message this member
// dispatches or holds, or a backup's copy), queue, id, number if any, key
// tail and value. The record is appended before the put, the forward, the
// hold, the backup frame or the handover that brings the message is
// answered, and before the queue takes it, outside every lock: the log
// group-commits one fsync for all queues, and a message cannot leave the
// queue before its append returned, because it is not in the queue yet.
// What the queue then refuses (a full queue, a moved dispatcher, a
// duplicate id) is released at once. The record's seq rides on the message
// (message.lseq, incoming.lseq) and is released when the message leaves
// this member's custody: acknowledged, inserted or dead-lettered, dropped
// as a duplicate, handed to another member that answered, a backup copy
// released or reset. A release is a few bytes in the next write.
//
// A third kind marks a batch sent to ClickHouse (recTried: queue, its
// rows' ids in order, about a byte a row), appended before the batch's
// first attempt and released when it settles; given up (a stop, a
// hand-over) it stays with the mark (queue.tried) and goes where its
// first row goes. Replayed, it puts its rows, found by id, together and
// in its order where the first of them lies (puts are appended in one
// order and numbered in another, and a restart numbers them again in the
// log's), its first row marked, so that a member killed or stopped while
// an insert was in flight or waiting to retry sends the same rows as one
// batch at its next start, with the same dedup token. A fourth kind
// (recMark: queue, rows, the first row's id) is the mark that came with
// a hand-over or a hold, appended with the first row's record before
// the answer, as the sender releases its recTried then, or that a
// backup kept on its copy, appended as it takes the queue over
// (takeOver): replayed, it marks that row again, and the rows after
// it in number order (the sender's numbers, which the records keep) form
// the batch. A tried batch formed again writes a recTried of the rows it
// has and releases the mark's record before its first attempt here.
//
// New replays the log; Start gives each queue its records as held copies,
// so the reconcile loop does with them what it does with any held copy:
// claims the queue when nobody alive dispatches it (the copies join it,
// numbers kept where free) or hands them to the dispatcher, which keeps
// one per id. A copy's record is released once the dispatcher, maybe
// this member, has it on its own disk. A release lost in a crash brings
// the message back once (at least once). A backup's copy's record names
// the dispatcher and the run of its process it was kept for (a fifth
// kind, recBackupOf), and the copy read back is handed over with them
// (ForwardBatch's backup_of, backup_boot): that run, still dispatching in
// the epoch of the copy's number, gave the number and drops the copy
// unless it holds the message (dropLeftLocked); that run's full copy or
// lone RESET (ForwardBatch.full) replaces such copies still held here,
// which are dropped then (supersede). Other dispatchers drop
// only the ids they remember as acknowledged, which are bounded (doneIDs
// per queue), so a backup killed and started again much later may bring
// back copies of messages acknowledged meanwhile when its dispatcher
// restarted or failed over too; a backup that leaves on SIGTERM
// publishes that it leaves (gossip.Membership.MarkLeaving), so that its
// alive dispatchers give
// another member a full copy and RESET it, waits for that (at most 5 s),
// and then releases what copies of alive dispatchers are left (Handoff),
// which keep theirs. NoSync (--unsafe-no-fsync)
// writes without fsync; QuotaBytes (--quota-backend-bytes) or a full disk
// fails the put with etcd's "database space exceeded" and calls
// OnNoSpace (cmd/chute raises etcd's NOSPACE alarm). While that alarm is
// raised, a row ClickHouse refuses stays queued, because its dead letter
// is a key the alarm refuses; it is tried again after a pause and stored
// once the alarm is disarmed (drain.go).
//
// # Guarantees and limits
//
// Delivery is at least once: a message is redelivered when its consumer
// goes or it stays unacknowledged past the visibility timeout, and when a
// dispatcher hands over messages its consumers had not acknowledged, and
// when a member restarts with messages whose acknowledgement it had not
// written yet. With ack=queued a dispatcher's messages are on its disk:
// one that dies keeps them until it starts again on its data dir (its
// disk lost loses them); with ack=replicated its backup's disk has them
// too and the backup takes over at once. Order is kept per producer
// connection through handovers, whichever member the connection is to: a
// record written as a queue moves from an alive member names it (from),
// and the new dispatcher delivers nothing until that member's DONE says
// its hand-over is done, or handoverAwait (dispatchLocked); not through a
// takeover by a backup or a restart. A txn producing to several queues is all or nothing when this
// member dispatches them all (produceAllHere), else atomic per queue only. All members killed at once lose nothing
// acknowledged: each recovers its queue log at its next start. Without a
// data dir (unit tests) everything is in memory, and Shutdown reports the
// messages it loses.
//
// Known limits of at least once, beyond a release lost in a crash: the ids
// a dispatcher remembers as acknowledged go with a hand-over (a DONE
// frame, sendDone), not with a takeover after a kill, and a queue
// forgotten forgets them (forget.go), so a held copy that reaches the next
// dispatcher after the previous one had the message acknowledged is
// delivered (or inserted) again then; and a dispatcher cut off from the
// majority while it still reaches ClickHouse goes on inserting what it
// holds (its fence, fence.go, cannot read the cluster's key space and lets
// batches go), while the member that took over inserts the same rows in
// batches of its own, whose dedup tokens differ (they name their rows):
// ClickHouse has no way to fence the old writer. A dispatcher frozen
// (SIGSTOP) or lagging, that can read, gives its batches to the new
// dispatcher at its next attempt instead.
//
// # What other members may send
//
// A member is trusted to be a member, not to be correct: the Queues
// service (peer.go) holds what it is sent to the limits a client's put is
// held to, and bounds what one call may carry (bounds.go).
//
//   - One ForwardBatch or Hold carries at most 4096 messages, all of one
//     queue: a member sends one queue per call, at most 512 messages per
//     handover chunk and a txn's puts (MaxTxnOps, 128 by default) per
//     produce batch, so 4096 leaves room for a raised --max-txn-ops. A
//     ForwardFrame carries at most 256 batches, as the sender packs them;
//     a RELEASE names at most 2^20 numbers, and so does a DONE, in
//     triples (an origin, N/64 below 2^58, a bitmap), of which the queue
//     keeps the last doneIDs ids; a frame names at most 2^20 in all, which
//     the peer codec counts before it makes them (peerpb.MaxFrameSeqs).
//     A Taken call carries at most 2^14 blocks of ids, as bytes (24 a
//     block: DONE's triples), held to their length in memory.
//   - Each message's queue name and key are one segment of the key
//     grammar (key.go), its producer key /q/{name}/p/{key} at most
//     Config.MaxKeyBytes and its value at most Config.MaxRequestBytes, the
//     client limits of kv (1 KiB and 1.5 MiB by default); a ClickHouse
//     queue's value is a JSON object, as a put's is (sink.ValidateRow).
//     That check is the one a txn's rows to one queue get when forwarded:
//     the forwarding member checks them only when the queue's record does
//     not name another member alive (before it would claim the queue),
//     before it keeps them itself (copies held) and when the dispatcher
//     refuses them, for the client's error to name the put's key.
//   - The byte cap (max_bytes) holds for forwarded, held and backed-up
//     messages as for local puts: a full queue answers ResourceExhausted
//     ("etcdserver: too many requests"), which the forwarding member
//     returns to its client. A dispatcher sends the releases it has not
//     sent yet with each backup frame, so its backup holds no more than
//     the queue does; should a backup still be full, the put fails
//     ResourceExhausted though the dispatcher queued it (a retry may make
//     a second copy: delivery is at least once).
//   - Epochs are at most 2^32-1 (maxEpoch): epoch e numbers messages from
//     (e-1)<<32 + 1 to e<<32, so a larger epoch has no numbers. A record
//     with a larger epoch, or one that does not fit in 64 bits, does not
//     parse: a client's put of it is InvalidArgument and so is a member's
//     replicated write of it (kv asks Check). A queue whose record is at
//     the last epoch is not claimed; a put to it fails FailedPrecondition
//     until its record is deleted.
//   - A message number above maxEpoch<<32, or of an epoch more than 2^16
//     above the epoch of this member's record of the queue, is refused
//     with OutOfRange: records travel in milliseconds, and claims settled
//     out of order leave a record a few epochs behind, never 2^16.
//   - No counter wraps: a queue that has given its last number keeps what
//     comes after unnumbered and refuses puts (ResourceExhausted), and a
//     member whose message ids (MsgID.N, started at its boot time in
//     nanoseconds) reach 2^64-1 refuses puts. A member's message ids are
//     never adopted by another, so they need no lead bound.
//
// # Memory
//
// A queue may hold millions of messages, so a queued message costs little
// beyond its value (at most 128 bytes; BenchmarkQueue_rowMemory
// measures it): an 80-byte message (id, key tail, value, the mapping
// that holds the value, its queue log seq, delivery count and state),
// the tail's bytes, a slot of the queue's store and a slot of
// its id index.
//
// With a data dir the value is not on the Go heap: every queued value is
// in the queue log already, so the message's value is its record's bytes
// in the log's read-only mapping (qlog, "Mapped records"), and the
// message keeps the mapping's qlog.Region. The bytes then cost page
// cache, which the kernel writes back and can drop, not the process's
// memory, and the garbage collector neither marks them nor doubles them
// in its headroom (GOGC). BenchmarkQueue_rowMemory, 100,000 rows of 256
// bytes in txn-128 puts: live heap 362 bytes a row before, 106 after;
// resident memory growth about 590 bytes a row before, 270 after (a row
// is bounded by its value, its key and 64 bytes). The alternatives
// measured worse on paper: values in an anonymous off-heap arena stay
// resident (256 bytes) beside a heap overhead that GOGC doubles (about
// 470 bytes a row); a pointer-free slab of messages would spare the
// collector the scan of the messages but not the values' bytes, for a
// rewrite of the store and the id index. Memory only (no data dir),
// values stay on the heap.
//
// A mapped value is valid while its message (or an incoming copy, which
// carries the Region) is reachable. The drainer holds its batch's
// messages while it inserts and sink copies the values into the body;
// what may outlive the message copies the value: a watch delivery
// (message.heapValue), a frame to another member (batchOf, toMessages), a dead
// letter. When compaction moves a long-queued message's record and the
// log deletes the segment, the mapping would keep the deleted file's
// disk space; the reconcile loop copies such values to the heap
// (rehomeValues, custody.go), except in ClickHouse queues, whose drainer
// reads its rows' values without the queue's lock: there a row kept
// long while later ones are inserted (one refused under a NOSPACE alarm)
// keeps its deleted segment's space until it leaves. The store (store.go) keeps messages by number in one run
// of slots, numbers being given in arrival order, and the few that do not
// fit in a map (numbers of another epoch; a message left at the front
// long after the ones behind it were acknowledged): the run never has
// more holes than messages plus a constant, so it costs at most about two
// pointers a message. The id index (ids.go) is an open-addressing table of
// the messages themselves. What concerns few messages at a time is kept
// beside them, in maps bounded by the consumers' prefetch or by tracing:
// which consumer holds a delivered message and since when (queue.out,
// queue.parked), the traces of traced puts (queue.traces). A drainer keeps
// no list of its rows: they are the messages in state msgDrained, and a
// batch is the oldest of them by number, read from the store.
//
// # Time
//
// Every timer of the package runs on Config.Clock: the visibility sweep,
// the reconcile loop, batch intervals, retry pauses (internal/backoff
// computes them), the down periods of ClickHouse servers (sink.Servers),
// forward deadlines, the passing over of a silent backup, and the
// timestamps they compare. Tests give a fake clock and advance
// it; the ones that must take real time live in *_timing_test.go.
// Deadlines of calls to other members and to ClickHouse are contexts,
// which cross the network on the real clock.
//
// Locks: Manager.mu and queue.mu are never held together; queue.handoverMu
// is taken before queue.backupMu, queue.mu and Manager.mu; queue.backupMu
// before queue.staleMu, queue.mu and Manager.mu; queue.staleMu is taken
// under queue.mu only with TryLock (forget.go); Manager.backupMu and the
// settings cache's mutex are taken alone. queue.mu may be held while calling kv.Deliveries (which never
// blocks) and while reading the KV. The queue log's Release (which never
// blocks on I/O) is called under queue.mu and Manager.backupMu; its
// Append, which waits for an fsync, under no lock.
package dispatch
