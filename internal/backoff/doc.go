// Package backoff computes the pauses of chute's retry loops: joining the
// seeds, reopening a replication or forward stream, handing a queue over,
// retrying a ClickHouse insert.
//
// It only computes delays. Each loop waits on its own clock (dispatch's
// injected clockwork.Clock, or a timer where no clock is injected), so a
// test that fakes time controls every retry by advancing its clock.
package backoff
