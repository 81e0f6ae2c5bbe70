package qlog

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them: a
// log's writer must end with Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
