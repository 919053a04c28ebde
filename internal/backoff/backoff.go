// Package backoff is the exponential delay with jitter of every retry loop:
// the root package's connect backoff (pool.go) and the background loops of
// internal/cache use it.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Backoff waits Min after the first failure, doubling with each further one
// up to Max. Each delay is drawn from [d/2, d], so that brokers do not retry
// in step. Not safe for concurrent use.
type Backoff struct {
	Min, Max time.Duration
	failures int // since the last reset
}

// New is the background loops' backoff: 50 ms doubling to 5 s.
func New() *Backoff { return &Backoff{Min: 50 * time.Millisecond, Max: 5 * time.Second} }

// Reset records a success: the next failure waits Min again.
func (b *Backoff) Reset() { b.failures = 0 }

// Failures is the number of failures since the last reset.
func (b *Backoff) Failures() int { return b.failures }

// Next records a failure and returns how long to wait before the next try.
func (b *Backoff) Next() time.Duration {
	b.failures++
	d := b.Min << min(b.failures-1, 20)
	if d > b.Max || d <= 0 {
		d = b.Max
	}
	d = max(d, 0)
	return d/2 + rand.N(d/2+1)
}
