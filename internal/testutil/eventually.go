package testutil

import (
	"errors"
	"testing"
	"time"
)

// PollInterval is how long Eventually waits between two calls of its
// condition.
const PollInterval = 20 * time.Millisecond

// Eventually calls cond every PollInterval until it returns nil, and
// fails the test with what and cond's last error once timeout has passed.
// cond is called at least once, and once more after the deadline so that
// a slow last call still counts.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	if err := poll(timeout, PollInterval, cond); err != nil {
		t.Fatalf("%s: not within %v: %v", what, timeout, err)
	}
}

// EventuallyTrue is Eventually for a condition that has nothing to say
// but whether it holds.
func EventuallyTrue(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	Eventually(t, timeout, what, func() error {
		if !cond() {
			return errNotYet
		}
		return nil
	})
}

// errNotYet is the error of an EventuallyTrue condition that does not hold.
var errNotYet = errors.New("condition false")

// poll calls cond every interval until it returns nil or timeout has
// passed, and returns cond's last error.
func poll(timeout, interval time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(interval)
	}
}
