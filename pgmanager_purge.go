package remotestorage

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/krabka/remotestorage/db"
	"github.com/krabka/remotestorage/internal/cache"
	"github.com/krabka/remotestorage/internal/partition"
)

// PgManager's purge (purge.go says what is purged, and when): PurgeForgotten
// and the background purger.

// PurgeForgotten deletes, in bounded batches, every segment forgotten for
// longer than olderThan (with all it stored), and takes the delete record of
// each partition in DELETE_PARTITION_FINISHED for longer than that once its
// segments are gone, so that adds to it work again. Returns the number of
// segments deleted. The age is measured on the database's clock.
//
// Each round is one call of the SQL function rlmm_purge_round (which DBAs
// call from psql too, through rlmm_purge), bounded by the batch size, that locks its rows with
// SKIP LOCKED: several managers may purge at once, none deletes what
// another already did, and none waits on another (or on a broker's write);
// a row one of them skipped
// is purged by the one holding it, or by the next purge. Purging changes no
// query's answer. A purged segment's id may be added again.
//
// A negative olderThan is an error.
func (m *PgManager) PurgeForgotten(ctx context.Context, olderThan time.Duration) (int64, error) {
	if olderThan < 0 {
		return 0, negativeAge(olderThan)
	}
	olderThanUs := olderThan.Microseconds()
	batch := m.opts.batchSize()
	var total int64
	for {
		r, err := m.queries.PurgeRound(ctx, m.pool, db.PurgeRoundParams{OlderThanUs: olderThanUs, BatchSize: batch})
		if err != nil {
			return total, ioError(ctx, err, "purge (%d segments purged before)", total)
		}
		m.purged.Add(r.Segments)
		total += r.Segments
		if m.cache != nil {
			// Partitions whose delete record the round took: their
			// delete_version moved, and the round notified it; this
			// manager's cache applies it at once.
			for i, id := range r.TopicIds {
				tp := partition.TopicIDPartition{TopicID: uuid.UUID(id), Topic: r.Topics[i], Partition: r.Partitions[i]}
				version := r.Versions[i]
				m.cache.Applied(tp, cache.OwnWrite{Order: version, Xid: r.Xid}, func(d *cache.Data) { d.Purged(version) })
			}
		}
		// Stop when a round found nothing: a batch that deleted fewer than
		// it may have skipped rows another purge holds, and that purge
		// goes on.
		if r.Segments == 0 && len(r.TopicIds) == 0 {
			return total, nil
		}
	}
}

// PurgedSegments is how many segments this manager has purged, in the
// background and through PurgeForgotten: Instrument exports it as
// rlmm_purged_segments_total.
func (m *PgManager) PurgedSegments() int64 { return m.purged.Load() }

// purger runs a PgManager's background purge. Between two purges it holds
// no goroutine, only a timer: a manager that is never closed leaves nothing
// running until the timer fires.
type purger struct {
	m         *PgManager
	retention time.Duration
	interval  time.Duration
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup // a purge in flight

	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
	failing bool // the last purge failed (logged once per failing streak)
}

// startPurger starts m's background purge; nil when the retention is 0.
func startPurger(m *PgManager) *purger {
	retention := m.opts.retention()
	if retention <= 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &purger{m: m, retention: retention, ctx: ctx, cancel: cancel,
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
	_, err := p.m.PurgeForgotten(ctx, p.retention)
	cancel()

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	switch {
	case err != nil && !p.failing:
		p.failing = true
		p.m.logWarn("background purge of forgotten segments failed; it retries at its next interval", "error", err)
	case err == nil && p.failing:
		p.failing = false
		p.m.logInfo("background purge of forgotten segments works again")
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
