package remotestorage

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// maxPurgeInterval bounds the pause between two background purges; the
// pause is a quarter of the retention when that is shorter (at least
// minPurgeInterval), with ±25 % jitter so that brokers started together do
// not purge in step.
const (
	maxPurgeInterval = time.Minute
	minPurgeInterval = 100 * time.Millisecond
)

// purger runs a PgManager's background purge: purge (the manager's
// PurgeForgotten) each interval; warn when it starts failing, info when it
// works again. Between two purges it holds no goroutine, only a timer: a
// manager that is never closed leaves nothing running until the timer
// fires.
type purger struct {
	purge      func(ctx context.Context, olderThan time.Duration) (int64, error)
	warn, info func(msg string, args ...any)
	retention  time.Duration
	interval   time.Duration
	ctx        context.Context
	cancel     context.CancelFunc
	wg         sync.WaitGroup // a purge in flight

	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
	failing bool // the last purge failed (logged once per failing streak)
}

// startPurger starts a background purge of what was forgotten longer ago
// than retention; nil when the retention is 0.
func startPurger(retention time.Duration, purge func(ctx context.Context, olderThan time.Duration) (int64, error), warn, info func(msg string, args ...any)) *purger {
	if retention <= 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &purger{purge: purge, warn: warn, info: info, retention: retention, ctx: ctx, cancel: cancel,
		interval: min(maxPurgeInterval, max(minPurgeInterval, retention/4))}
	p.mu.Lock()
	p.arm()
	p.mu.Unlock()
	return p
}

// arm schedules the next purge after the interval, ±25 % jitter. Callers
// hold p.mu.
func (p *purger) arm() {
	pause := p.interval*3/4 + rand.N(p.interval/2+1)
	p.timer = time.AfterFunc(pause, p.run)
}

// run purges what the retention expired, then schedules the next run.
func (p *purger) run() {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()

	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Minute)
	_, err := p.purge(ctx, p.retention)
	cancel()

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	switch {
	case err != nil && !p.failing:
		p.failing = true
		p.warn("background purge of forgotten segments failed; it retries at its next interval", "error", err)
	case err == nil && p.failing:
		p.failing = false
		p.info("background purge of forgotten segments works again")
	}
	p.arm()
}

// stop stops the background purge and waits for a purge in flight, which
// is cancelled (its statement's transaction rolls back).
func (p *purger) stop() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.stopped = true
	p.timer.Stop()
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
}
