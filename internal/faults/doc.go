// Package faults is the tooling of chute's fault tests: a
// producer workload that records the outcome of every put (workload.go,
// outcome.go), consumers of a plain queue that acknowledge and record
// every delivery (consumer.go), an oracle that compares those outcomes
// with the rows ClickHouse holds or the consumers received (oracle.go,
// clickhouse.go), a writer of the figures in
// docs/reliability.md (report.go), a TCP proxy that slows, hangs or
// refuses ClickHouse and records the connections it forwarded
// (proxy.go), network namespaces on a bridge that cut one node off from
// the others and heal it (netns.go), the JSON of a queue's settings key
// (settings.go) and a recorder and checker of key-space histories
// (linearize.go); a node's /status, /metrics and resident memory are read
// with package nodeprobe. The scenarios
// themselves (nodes as processes, SIGKILL, SIGSTOP, ClickHouse stopped)
// live in internal/e2e/faults_*_test.go; this package has no processes of
// its own and never reads flags or the environment.
//
// # Ids
//
// Every put carries a unique id, producer<<32 | n (ID), as the JSON value
// {"id":<id>,"p":<producer>,"n":<n>[,"pad":"..."]} at the key
// /q/{queue}/p/{producer}-{n}. The table the scenarios create has the
// columns id UInt64, p UInt32, n UInt64 and pad String, so a row is
// traced back to its put by id alone.
//
// # Outcomes and the oracle
//
// A put ends Acked (the server answered OK), Failed (it answered an error,
// kept as a gRPC code) or TimedOut (no answer before the put's deadline).
// Judge compares the outcomes with the multiset of ids in the table:
//
//	lost           acknowledged and absent
//	duplicates     rows beyond the first of an id (extra copies)
//	indeterminate  failed or timed-out puts whose row landed anyway
//	refused landed puts refused with a definite code (InvalidArgument,
//	               ResourceExhausted) whose row landed: always a bug
//	unknown        ids in the table that no put carried
//
// For a plain queue JudgeReceipts does the same with what the consumers
// received: an id counts as landed once it was delivered and a node
// answered OK to its acknowledgement (deleted or not: a dispatcher takes
// an acknowledgement of a message it has not recovered yet for when it
// comes), and its deliveries beyond the first are extra copies.
//
// Verdict.Check(maxLost, maxDuplicates) fails on more lost ids or extra
// copies than allowed, and on any refused-landed or unknown id. The oracle
// only knows what it is shown: rows still on their way count as lost, so
// callers wait for the queue to drain (WaitIDs) before they judge.
//
// # Linearizability
//
// A History records register operations (get, put, compare-and-swap on
// a value) of concurrent clients with their call and return times;
// CheckKV checks it with porcupine against KVModel, one register per
// key. An operation without a definite answer may or may not have
// happened: a read of that kind is dropped, a write returns after every
// other operation, so the checker may order it anywhere after its call.
// A history the checker cannot decide within its timeout is an error,
// never a pass.
//
// Two more checks read the revisions of the answers (KVOutput.Revision),
// as etcd's robustness tests do: CheckRevisions, that an operation begun
// after another returned never answers an older revision (nor the same
// one when it wrote), and CheckWatch, that watches of the keys from
// revision 1 received every revision once and in order, all the same
// events, each a value some write wrote and every acknowledged write at
// the revision its answer gave (watch.go).
//
// # Partitions
//
// A Network runs each node in a network namespace of its own, linked to
// a bridge in a hub namespace; Isolate takes one node's link down, which
// drops its TCP and UDP both ways, and Heal brings it back. The host's
// namespace is never changed: the test process talks to the nodes with
// sockets made inside their namespaces (Network.Dial, used by a Proxy
// on the host's loopback) and offers ClickHouse to them with a Proxy
// listening in the hub (Network.ListenHub). Creating namespaces needs
// root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and iproute2; the tests of it
// carry the e2e tag.
//
// # Concurrency
//
// A Workload's methods may be called from any goroutine; its producers are
// goroutines it owns, ended by Stop or its bounds. So are a Consumer's
// methods and its watches and acknowledgers. A Proxy's methods may
// be called from any goroutine; Close ends every goroutine it started.
// WriteReport serializes writers of this process with one mutex and
// replaces the file atomically (rename); two processes writing one report
// at once may lose one another's rows.
package faults
