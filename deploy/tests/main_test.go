package tests

import (
	"os"
	"testing"

	"chute/internal/testutil"
)

// TestMain runs the tests, then removes what the e2e build made
// (afterTests), then fails a run that passed but left a node's default
// data dir here or goroutines running.
func TestMain(m *testing.M) {
	os.Exit(testutil.MainChecks(m, "tests", afterTests))
}
