package backoff

import (
	"math/rand/v2"
	"time"
)

// Backoff is capped exponential backoff with jitter. The first pause is
// about Min, each next one about twice the last, up to Max; Reset starts
// again from Min after a success. Every pause is drawn from [d/2, d] of
// its step d, so members started together do not retry together and a
// pause never exceeds Max.
//
// The fields may change between calls (dispatch reads them from a queue's
// settings at every batch); the next step is then clamped to the new
// bounds. A Backoff is owned by one loop and is not safe for concurrent
// use.
type Backoff struct {
	// Min is the first step. Zero or negative: pauses of zero.
	Min time.Duration
	// Max caps every step. Below Min: Min.
	Max time.Duration

	step time.Duration // of the last pause; 0 before the first
}

// Next returns the pause before the next attempt and doubles the step.
func (b *Backoff) Next() time.Duration {
	if b.step == 0 {
		b.step = b.Min
	} else if b.step > b.Max/2 {
		b.step = b.Max // no overflow for a huge Max
	} else {
		b.step *= 2
	}
	b.step = max(min(b.step, b.Max), b.Min)
	if b.step <= 1 {
		return max(b.step, 0)
	}
	return b.step - rand.N(b.step/2+1)
}

// Reset makes the next pause start from Min again.
func (b *Backoff) Reset() { b.step = 0 }
