//go:build e2e

package e2e

import (
	"fmt"
	"syscall"
	"testing"

	"chute/internal/chtest"
	"chute/internal/testutil"
)

// TestHandoff_sigtermHandsQueuesOver checks that a dispatcher stopped with
// SIGTERM hands its queues to another node before it leaves: an ordinary
// queue with messages nobody consumed yet moves whole, in order, and a
// ClickHouse queue's rows waiting for a missing table land once, after the
// node is gone.
func TestHandoff_sigtermHandsQueuesOver(t *testing.T) {
	t.Parallel()
	ch := chtest.Start(t)
	cl := newCluster(t)
	a, b, _ := cl.startThree(chFlags(ch)...)
	for i := range 40 {
		ctlOK(t, a, "", "put", fmt.Sprintf("/q/jobs/p/%03d", i), "job")
		ctlOK(t, a, "", "put", fmt.Sprintf("/q/ch:handed/p/%03d", i), fmt.Sprintf(`{"id":%d}`, i))
	}
	waitLogLine(t, a, "insert failed", "queue=ch:handed", "code=60")
	if got := mustQueueOn(t, a, "jobs").Rows; got != 40 {
		t.Fatalf("a holds %d messages of jobs, want 40", got)
	}
	aID := memberID(t, a)
	if err := a.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-a.Done()
	waitLogLine(t, a, "handing the queue to another member before leaving", "queue=jobs")
	others := []*Proc{b}
	rec := waitSameRecord(t, "jobs", others, nil)
	// The node it went to takes the next epoch for its own numbers.
	if rec.member == aID || rec.epoch < 2 {
		t.Fatalf("record of jobs after a left: %+v, want another node at epoch 2 or past", rec)
	}
	ch.Exec(t, "CREATE TABLE default.handed (id UInt64) ENGINE = MergeTree ORDER BY id")
	waitQuery(t, ch, rowsTimeout, "SELECT count(), uniqExact(id) FROM default.handed", "40\t40")

	c := startConsumer(t, b, "/q/jobs/c/after", 2)
	testutil.Eventually(t, rowsTimeout, "40 deliveries of jobs", func() error {
		if n := len(c.deliveries()); n != 40 {
			return fmt.Errorf("%d deliveries", n)
		}
		return nil
	})
	for i, d := range c.deliveries() {
		if want := fmt.Sprintf("%03d", i); d.Msg != want {
			t.Fatalf("delivery %d: %s, want %s (order kept)", i, d.Msg, want)
		}
	}
}
