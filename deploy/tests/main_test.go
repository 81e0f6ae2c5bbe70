package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the tests, then the e2e build's checks (afterTests),
// then fails a run that passed but left goroutines running.
func TestMain(m *testing.M) {
	before, _ := filepath.Glob("*.chute")
	code := afterTests(m.Run(), before)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "tests: goroutines left running after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
