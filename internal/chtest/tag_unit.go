//go:build !e2e

package chtest

// e2eBuild says whether the tests that link this package were built with
// the e2e tag, which every test starting a ClickHouse server needs.
const e2eBuild = false
