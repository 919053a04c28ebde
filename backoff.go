package remotestorage

import (
	"math/rand/v2"
	"time"
)

// backoff is the exponential delay with jitter of every retry loop: min
// after the first failure, doubling with each further one up to max. Each
// delay is drawn from [d/2, d], so that brokers do not retry in step. The
// pool's connect backoff (pool.go) and the background loops of the cache
// and the notifier use it. Not safe for concurrent use.
type backoff struct {
	min, max time.Duration
	failures int // since the last reset
}

// newBackoff is the background loops' backoff: 50 ms doubling to 5 s.
func newBackoff() *backoff { return &backoff{min: 50 * time.Millisecond, max: 5 * time.Second} }

// reset records a success: the next failure waits min again.
func (b *backoff) reset() { b.failures = 0 }

// next records a failure and returns how long to wait before the next try.
func (b *backoff) next() time.Duration {
	b.failures++
	d := b.min << min(b.failures-1, 20)
	if d > b.max || d <= 0 {
		d = b.max
	}
	d = max(d, 0)
	return d/2 + rand.N(d/2+1)
}
