package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.uber.org/goleak"
)

// MainChecks runs m's tests and returns the exit code for TestMain: 1
// when they passed but left a default data dir (<name>.chute: a node
// started without --data-dir) in the working directory, a package of
// the repository, that was not there before, or goroutines running
// (goleak, with opts). after, when not nil, runs between the tests and
// the checks. who names the package in what it prints.
func MainChecks(m *testing.M, who string, after func(), opts ...goleak.Option) int {
	before, _ := filepath.Glob("*.chute")
	code := m.Run()
	if after != nil {
		after()
	}
	now, _ := filepath.Glob("*.chute")
	for _, d := range now {
		if !slices.Contains(before, d) {
			fmt.Fprintf(os.Stderr, "%s: the tests left the data dir %s in the repository: give the node a temporary --data-dir\n", who, d)
			code = 1
		}
	}
	if code == 0 {
		if err := goleak.Find(opts...); err != nil {
			fmt.Fprintf(os.Stderr, "%s: goroutines left running after the tests: %v\n", who, err)
			code = 1
		}
	}
	return code
}
