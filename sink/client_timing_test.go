package sink

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The client's only clock is the deadline of its connection, which the
// kernel measures in real time: these tests take real time, about a
// third of a second, and allow a loaded machine a wide margin.

// blockingAnswer answers only when the client goes away or the test ends.
func blockingAnswer(t *testing.T) func(http.ResponseWriter, *http.Request, []byte) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	return func(w http.ResponseWriter, r *http.Request, _ []byte) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}
}

func TestClient_Insert_timeout(t *testing.T) {
	f := newFakeClickHouse(t, false)
	f.setAnswer(blockingAnswer(t))
	c := NewClient(ClientConfig{Timeout: 200 * time.Millisecond})
	res := c.Insert(context.Background(), f.endpoint("u", "s3cr3t"), "`d`.`t`", [][]byte{[]byte(`{}`)}, "")
	if res.OK() || res.Class != ClassTransient || res.Status != 0 || !errors.Is(res.Err, ErrTimeout) {
		t.Fatalf("got %+v, want a transient timeout", res)
	}
	if res.Duration < 200*time.Millisecond || res.Duration > 5*time.Second {
		t.Errorf("Duration %v, want about the 200ms timeout", res.Duration)
	}
	if !strings.Contains(res.Message, "did not answer") {
		t.Errorf("message %q", res.Message)
	}
}

func TestClient_Insert_contextEnds(t *testing.T) {
	f := newFakeClickHouse(t, false)
	f.setAnswer(blockingAnswer(t))
	c := NewClient(ClientConfig{Timeout: 30 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	res := c.Insert(ctx, f.endpoint("", ""), "`d`.`t`", [][]byte{[]byte(`{}`)}, "")
	if res.Class != ClassTransient || !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("got %+v, want a transient context.Canceled", res)
	}
	if res.Duration > 5*time.Second {
		t.Errorf("Duration %v: the cancelled request waited for its timeout", res.Duration)
	}

	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	res = c.Insert(ctx, f.endpoint("", ""), "`d`.`t`", [][]byte{[]byte(`{}`)}, "")
	if res.Class != ClassTransient || !errors.Is(res.Err, context.DeadlineExceeded) || !errors.Is(res.Err, ErrTimeout) {
		t.Fatalf("got %+v, want a transient context.DeadlineExceeded and ErrTimeout", res)
	}
}
