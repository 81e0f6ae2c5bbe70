// Package nodeprobe reads a running chute node and its ClickHouse from
// outside, as the benchmark, the fault scenarios and the end-to-end tests
// do: GET /status decoded into the node's own types (package nodestatus),
// GET /metrics parsed by Prometheus' expfmt, a process's resident memory
// from /proc, and statements over ClickHouse's HTTP interface.
//
// Every call takes a context, which bounds it, and an *http.Client; a nil
// client means one without keep-alive, made for the call, so that a
// connection pooled to a node or server a test has killed is never
// reused. A node is named by its metrics listener, host:port or a URL.
package nodeprobe
