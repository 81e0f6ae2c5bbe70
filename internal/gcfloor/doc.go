// Package gcfloor keeps the garbage collector's headroom, how far the
// heap may grow between collections, from falling below a floor.
//
// With GOGC at 100 the collector starts a cycle once the heap has grown
// by as much as was live after the last one. A chute node keeps its
// queued rows in its queue log's mappings, off the Go heap, so its live
// heap is small (a few MiB answering single puts, tens of MiB taking
// txns of many puts, most of it batches on their way to ClickHouse)
// while gRPC allocates several KiB per call and a txn of puts tens of
// KiB: the collector then runs dozens of times a second, and each
// cycle's fixed cost (stacks, roots, write barriers, assists) and its
// marking of what is live fall on every put. A floor lets the heap grow
// by a fixed amount between cycles while the live heap is smaller than
// that, and changes nothing once the live heap is above it. The price is
// memory: a busy node's resident memory rises by about the floor and
// more (spans one cycle frees are not all reused before the next takes
// new ones), a constant: a queued row costs at most what it costs at
// GOGC 100. An idle node allocates little and stays small.
//
// The floor is on the growth, not on the heap goal, so that a live heap
// of tens of MiB gets the same headroom as one of a few: a floor of 64
// MiB on the goal left a node taking txns (34 MB live) 30 MB between
// collections, a dozen a second, and with the growth floored chute
// spent about a tenth less CPU per row (docs/operations.md, Heap floor).
//
// The floor works by setting GOGC (debug.SetGCPercent) after each
// collection, from the live heap that collection found: the heap goal is
// about the live heap times 1+GOGC/100. A memory limit (GOMEMLIMIT)
// still bounds the heap; the floor never raises a limit.
//
// GOGC is the process's own setting, so one Floor at most runs in a
// process, started by its main function; it restores the GOGC it found
// when stopped.
package gcfloor
