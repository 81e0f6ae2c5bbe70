// Package testutil holds the helpers chute's tests share, one per
// concept: Eventually polls a condition, FreePort and FreeAddr hand out
// loopback ports, Build builds a binary of this module, ProcessCPU reads
// the CPU time the test process used.
//
// Every wait is bounded by the timeout its caller gives; nothing sleeps
// longer than PollInterval at a time. FreePort never returns the same
// port twice within one test binary, so processes started by parallel
// tests do not race for a port between the test learning it and the
// process binding it.
package testutil
