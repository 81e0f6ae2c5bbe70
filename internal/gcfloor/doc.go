// Package gcfloor keeps the garbage collector's heap goal from falling
// below a floor.
//
// With GOGC at 100 the collector starts a cycle once the heap has grown
// by as much as was live after the last one. A chute node keeps its
// queued rows in its queue log's mappings, off the Go heap, so its live
// heap is small (a few MiB answering single puts) while gRPC allocates
// several KiB per call: the collector then runs dozens of times a second,
// and each cycle's fixed cost (stacks, roots, write barriers, assists)
// falls on every put. A floor lets the heap grow to a fixed size between
// cycles while the live heap is small, and changes nothing once twice
// the live heap is above it. The price is memory: a busy node's resident
// memory rises by about the floor and more (spans one cycle frees are
// not all reused before the next takes new ones), while what a queued
// row costs beyond the floor is as before. An idle node allocates little
// and stays small.
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
