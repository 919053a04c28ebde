package remotestorage

import (
	"time"

	"context"

	"github.com/google/uuid"

	"github.com/krabka/remotestorage/db"
	"github.com/krabka/remotestorage/internal/cache"
	"github.com/krabka/remotestorage/internal/dbuuid"
	"github.com/krabka/remotestorage/internal/partition"
)

// Test hooks into PgManager's cache.

// CacheTestSignals are the cache's test signals (internal/cache).
type CacheTestSignals = cache.TestSignals

// Cached reports whether the manager has a cache (WithCache).
func (m *PgManager) Cached() bool { return m.cache != nil }

// TestSignals returns the cache's test signals; they keep their events
// once the test calls their Init.
func (m *PgManager) TestSignals() *CacheTestSignals { return m.cache.TestSignals() }

// DropNotifications makes the cache's listener ignore every notification,
// as if they were lost.
func (m *PgManager) DropNotifications(drop bool) { m.cache.DropNotifications(drop) }

// BeforeCatchUp runs hook before each catch-up of a cached partition
// (loaded is false for the load). Set it before assigning partitions.
func (m *PgManager) BeforeCatchUp(hook func(tp TopicIDPartition, loaded bool)) {
	m.cache.BeforeCatchUp(func(tp partition.TopicIDPartition, loaded bool) { hook(TopicIDPartition(tp), loaded) })
}

// AfterCatchUpRead runs hook after each catch-up's reads, before the
// catch-up applies them (reload is true when it read the whole partition
// again).
func (m *PgManager) AfterCatchUpRead(hook func(tp TopicIDPartition, reload bool)) {
	m.cache.AfterCatchUpRead(func(tp partition.TopicIDPartition, reload bool) { hook(TopicIDPartition(tp), reload) })
}

// DiscardPendingCatchUp discards the catch-up of tp asked for and not
// started, if any.
func (m *PgManager) DiscardPendingCatchUp(tp TopicIDPartition) {
	m.cache.DiscardPendingCatchUp(partition.TopicIDPartition(tp))
}

// ListenerConnections returns how many times the cache's listener has
// listened since the cache started.
func (m *PgManager) ListenerConnections() int64 { return m.cache.ListenerConnections() }

// Listening reports whether the cache's listener is connected and listening.
func (m *PgManager) Listening() bool { return m.cache.Listening() }

// SnapshotForTest returns a snapshot of the primary taken now, as the
// cache keeps one: the writes committed after it are those it does not see.
func (m *PgManager) SnapshotForTest(ctx context.Context) (string, error) {
	var text string
	err := m.pool.QueryRow(ctx, "SELECT pg_current_snapshot()::text").Scan(&text)
	return text, err
}

// PartitionChangesForTest sends the cache's catch-up read of the segments
// of tp written since snapshot after, as one statement.
func (m *PgManager) PartitionChangesForTest(ctx context.Context, tp TopicIDPartition, after string) (int, error) {
	rows, err := m.queries.PartitionChanges(ctx, m.pool, db.PartitionChangesParams{TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition, After: after})
	return len(rows), err
}

// PartitionLoadForTest sends the cache's read of the live segments of tp
// that a load makes, and returns how many it read.
func (m *PgManager) PartitionLoadForTest(ctx context.Context, tp TopicIDPartition) (int, error) {
	rows, err := m.queries.PartitionLoad(ctx, m.pool, db.PartitionLoadParams{TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition})
	return len(rows), err
}

// EpochEndsLoadForTest sends the cache's read of tp's epoch ends that a
// load makes, and returns how many epochs it read.
func (m *PgManager) EpochEndsLoadForTest(ctx context.Context, tp TopicIDPartition) (int, error) {
	rows, err := m.queries.EpochEndsLoad(ctx, m.pool, db.EpochEndsLoadParams{TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition})
	return len(rows), err
}

// PartitionCatchUpForTest sends the cache's one-statement catch-up of tp
// since snapshot after, and returns how many segments it brought.
func (m *PgManager) PartitionCatchUpForTest(ctx context.Context, tp TopicIDPartition, after string) (int, error) {
	rows, err := m.queries.PartitionCatchUp(ctx, m.pool, db.PartitionCatchUpParams{TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition, After: after})
	return len(rows), err
}

// PollForTest sends the cache poll's statement for tps, each with snapshot
// after and delete_version 0, and returns how many it found behind.
func (m *PgManager) PollForTest(ctx context.Context, after string, tps ...TopicIDPartition) (int, error) {
	var params db.PartitionsBehindParams
	for _, tp := range tps {
		params.TopicIds = append(params.TopicIds, tp.TopicID.String())
		params.Partitions = append(params.Partitions, tp.Partition)
		params.Snapshots = append(params.Snapshots, after)
		params.DeleteVersions = append(params.DeleteVersions, 0)
	}
	rows, err := m.queries.PartitionsBehind(ctx, m.pool, params)
	behind := 0
	for _, r := range rows {
		if r.Behind {
			behind++
		}
	}
	return behind, err
}

// CachedSnapshot returns the snapshot tp's cache was last brought up to
// ("" when not loaded), without asking the database or waking the follower.
func (m *PgManager) CachedSnapshot(tp TopicIDPartition) string {
	after, _, loaded := m.cache.Cursor(partition.TopicIDPartition(tp))
	if !loaded {
		return ""
	}
	return after.Text()
}

// CacheHoldsSegment reports whether tp's cache holds segment id at its
// stored last_version or newer (forgotten included), without asking the
// database.
func (m *PgManager) CacheHoldsSegment(tp TopicIDPartition, id uuid.UUID, lastVersion int64) bool {
	return m.cache.HoldsSegment(partition.TopicIDPartition(tp), id, lastVersion)
}

// PurgesInBackground reports whether the manager runs the background purge.
func (m *PgManager) PurgesInBackground() bool { return m.purger != nil }

// SetClockForTest replaces the clock the manager's purge reads.
func (m *InMemoryManager) SetClockForTest(now func() time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = now
}
