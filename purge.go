package remotestorage

// purge.go: purging what is forgotten. A segment in DELETE_SEGMENT_FINISHED,
// or any segment of a partition in DELETE_PARTITION_FINISHED, is forgotten:
// no query returns it, but its row keeps its id taken. Once it has been
// forgotten for the retention, the purge deletes it with all it stored (its
// epoch rows), and a partition whose delete finished that long ago loses its
// delete record (adds work again). Each PgManager purges in the background;
// PurgeForgotten does the same on demand (rlmmctl purge uses it).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/krabka/remotestorage/db"
	"github.com/krabka/remotestorage/internal/cache"
	"github.com/krabka/remotestorage/internal/partition"
)

// DefaultForgottenRetention is how long a forgotten segment is kept before
// the background purge deletes it, when WithForgottenRetention is not given.
const DefaultForgottenRetention = 7 * 24 * time.Hour

// DefaultPurgeBatchSize is how many segments one purge transaction deletes
// at most, when WithPurgeBatchSize is not given. A batch of segments in one
// partition holds that partition's row for the batch (about 10 ms for 256
// segments here), so a broker's write to it can wait that long.
const DefaultPurgeBatchSize = 256

// maxPurgeInterval bounds the pause between two background purges; the
// pause is a quarter of the retention when that is shorter (at least
// minPurgeInterval), with ±25 % jitter so that brokers started together do
// not purge in step.
const (
	maxPurgeInterval = time.Minute
	minPurgeInterval = 100 * time.Millisecond
)

// WithForgottenRetention sets how long a forgotten segment (one in
// DELETE_SEGMENT_FINISHED, or any segment of a partition in
// DELETE_PARTITION_FINISHED) is kept, counted from the write that made it
// so. Each PgManager purges in the background what was forgotten longer ago
// than d, a bounded batch at a time, with brokers not repeating each other's
// work. Default 168h (7 days); 0 turns it off, and then ids stay taken until
// PurgeForgotten or an operator deletes them. An InMemoryManager purges by
// the same rule, as it writes. A negative d is taken as 0.
func WithForgottenRetention(d time.Duration) Option {
	return func(o *options) { o.forgottenRetention, o.forgottenRetentionSet = max(d, 0), true }
}

// WithPurgeBatchSize sets how many segments one purge transaction deletes at
// most (default DefaultPurgeBatchSize). Values below 1 are taken as 1.
func WithPurgeBatchSize(n int) Option {
	return func(o *options) { o.purgeBatchSize = max(n, 1) }
}

// retention is the background purge's retention; 0: off.
func (o options) retention() time.Duration {
	if o.forgottenRetentionSet {
		return o.forgottenRetention
	}
	return DefaultForgottenRetention
}

func (o options) batchSize() int32 {
	if o.purgeBatchSize > 0 {
		return int32(min(o.purgeBatchSize, 1<<30))
	}
	return DefaultPurgeBatchSize
}

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

// negativeAge is the error of PurgeForgotten for a negative olderThan.
func negativeAge(olderThan time.Duration) error {
	return fmt.Errorf("remotestorage: PurgeForgotten: olderThan %s is negative: want 0 or more", olderThan)
}

// The InMemoryManager's purge. It has no background goroutine (it has no
// Close): each write first purges, a bounded batch at a time, what its
// retention has expired, oldest first, from a queue of what was forgotten
// when.

// memForgotten is one entry of the InMemoryManager's queue: a segment that
// reached DELETE_SEGMENT_FINISHED, or a partition whose delete finished, at
// a time. An entry is stale once a later write (a retry) re-stamped it.
type memForgotten struct {
	id  uuid.UUID // the segment; uuid.Nil: the partition key
	key partitionKey
	at  time.Time
}

// forgetSegment records that segment id of key was forgotten now. Callers
// hold m.mu.
func (m *InMemoryManager) forgetSegment(id uuid.UUID, key partitionKey) {
	at := m.now()
	m.forgottenAt[id] = at
	if m.opts.retention() > 0 {
		m.expiry = append(m.expiry, memForgotten{id: id, key: key, at: at})
	}
}

// forgetPartition records that the delete of partition key finished now.
// Callers hold m.mu.
func (m *InMemoryManager) forgetPartition(key partitionKey) {
	at := m.now()
	m.deletedAt[key] = at
	if m.opts.retention() > 0 {
		m.expiry = append(m.expiry, memForgotten{key: key, at: at})
	}
}

// purgeExpired purges, before a write, up to a batch of what the retention
// has expired. Callers hold m.mu.
func (m *InMemoryManager) purgeExpired() {
	retention := m.opts.retention()
	if retention <= 0 {
		return
	}
	cutoff := m.now().Add(-retention)
	for n := int32(0); n < m.opts.batchSize() && len(m.expiry) > 0 && !m.expiry[0].at.After(cutoff); n++ {
		e := m.expiry[0]
		m.expiry[0] = memForgotten{}
		m.expiry = m.expiry[1:]
		if e.id == uuid.Nil {
			if at, ok := m.deletedAt[e.key]; ok && at.Equal(e.at) {
				m.purgePartition(e.key)
			}
		} else if at, ok := m.forgottenAt[e.id]; ok && at.Equal(e.at) {
			m.purgeSegment(e.id)
		}
	}
	if len(m.expiry) == 0 {
		m.expiry = nil // let the backing array go
	}
}

// purgeSegment frees the id of a forgotten segment. Callers hold m.mu.
func (m *InMemoryManager) purgeSegment(id uuid.UUID) {
	delete(m.takenIDs, id)
	delete(m.forgottenAt, id)
	m.purgedSegments++
}

// purgePartition frees the ids of every segment of a partition whose delete
// finished, and takes its delete record. Callers hold m.mu.
func (m *InMemoryManager) purgePartition(key partitionKey) int64 {
	var n int64
	for id, k := range m.takenIDs {
		if k == key {
			m.purgeSegment(id)
			n++
		}
	}
	delete(m.deletedAt, key)
	if p := m.partitions[key]; p != nil {
		p.version++
		p.DeleteState = int8(partitionDeleteNone)
		p.Empty()
		p.Changed()
	}
	return n
}

// PurgeForgotten deletes every segment forgotten for at least olderThan
// (its id may then be added again), and takes the delete record of each
// partition in DELETE_PARTITION_FINISHED for that long. Returns the number
// of segments deleted. A negative olderThan is an error.
func (m *InMemoryManager) PurgeForgotten(ctx context.Context, olderThan time.Duration) (int64, error) {
	if olderThan < 0 {
		return 0, negativeAge(olderThan)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cutoff := m.now().Add(-olderThan)
	var n int64
	for key, at := range m.deletedAt {
		if !at.After(cutoff) {
			n += m.purgePartition(key)
		}
	}
	for id, at := range m.forgottenAt {
		if !at.After(cutoff) {
			m.purgeSegment(id)
			n++
		}
	}
	return n, nil
}

// PurgedSegments is how many segments this manager has purged.
func (m *InMemoryManager) PurgedSegments() int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.purgedSegments
}
