// Package sink will own ClickHouse over HTTP with fasthttp: target and URL
// parsing, one INSERT ... FORMAT JSONEachRow request per batch, classification
// of ClickHouse's errors, retries with backoff, bisection of refused batches
// and dead letters.
//
// It holds no code yet; the ClickHouse queue issue fills it.
package sink
