package chscratch

import (
	"os"
	"testing"
	"time"

	"chute/internal/chtest"
)

func TestScratch(t *testing.T) {
	start := time.Now()
	ch := chtest.Start(t, chtest.Options{User: "writer", Password: "s3cr3t-pass"})
	t.Logf("started in %v", time.Since(start))
	os.WriteFile("/tmp/ch-url", []byte(ch.URL()), 0o644)
	time.Sleep(20 * time.Minute)
}
