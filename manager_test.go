package remotestorage_test

// manager_test.go: every run of the conformance suite (rlmmtest.Run) on
// the package's managers, in each of their configurations. The helpers of
// the cached and PgBouncer runs live beside the tests of those features
// (pgcache_test.go, pgmanager_pgbouncer_test.go).

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/rstest"
	"github.com/krabka/remotestorage/internal/testwait"
	"github.com/krabka/remotestorage/rlmmtest"
)

func TestInMemoryManagerConformance(t *testing.T) {
	t.Parallel()
	rlmmtest.Run(t, func(t *testing.T, opts ...rs.Option) rs.Manager {
		return rs.NewInMemoryManager(opts...)
	})
}

func TestPgManagerConformance(t *testing.T) {
	t.Parallel()
	// The suite's subtests use fresh random topic and segment ids, so they
	// share one database (a clone per subtest costs 0.2-1 s here), each with
	// a manager of its own.
	pool := pgtest.NewPool(t)
	rlmmtest.Run(t, func(t *testing.T, opts ...rs.Option) rs.Manager {
		m, err := rs.NewPgManager(t.Context(), pool, opts...)
		require.NoError(t, err)
		t.Cleanup(m.Close)
		return m
	})
}

// The conformance suite, answered from the cache.
func TestCachedPgManagerConformance(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	rlmmtest.Run(t, func(t *testing.T, opts ...rs.Option) rs.Manager {
		return &consumingManager{PgManager: newCachedManager(t, dsn, opts...), t: t, seen: map[[20]byte]bool{}}
	})
}

func TestPgBouncerConformance(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewBouncerPool(t)
	rlmmtest.Run(t, func(t *testing.T, opts ...rs.Option) rs.Manager {
		m, err := rs.NewPgManager(t.Context(), pool, opts...)
		require.NoError(t, err)
		t.Cleanup(m.Close)
		return m
	})
}

// The conformance suite answered from caches whose queries and writes go
// through PgBouncer and whose listener has a session connection of its own.
func TestPgBouncerCachedConformance(t *testing.T) {
	t.Parallel()
	pooled, direct := pgtest.NewBouncerDatabase(t)
	listener := rstest.ListenerOption(t, direct)
	rlmmtest.Run(t, func(t *testing.T, opts ...rs.Option) rs.Manager {
		return &consumingManager{PgManager: newCachedManager(t, pooled, append(opts, listener)...), t: t, seen: map[[20]byte]bool{}}
	})
}

// consumingManager makes a cached PgManager consume every partition the
// conformance suite touches, before the call, so the suite runs against the
// cache.
type consumingManager struct {
	*rs.PgManager
	t    *testing.T
	mu   sync.Mutex
	seen map[[20]byte]bool
}

// consume takes tp on and waits until it has loaded, the first time tp is
// seen. It returns an error rather than failing the test: the suite's
// racers call it from goroutines of their own, where a failed require
// would end the goroutine and leave its call looking like a success.
func (c *consumingManager) consume(tp rs.TopicIDPartition) error {
	var key [20]byte
	copy(key[:], tp.TopicID[:])
	key[16], key[17], key[18], key[19] = byte(tp.Partition>>24), byte(tp.Partition>>16), byte(tp.Partition>>8), byte(tp.Partition)
	c.mu.Lock()
	fresh := !c.seen[key]
	c.seen[key] = true
	c.mu.Unlock()
	if !fresh {
		return nil
	}
	if err := c.OnPartitionLeadershipChanges(context.Background(), []rs.TopicIDPartition{tp}, nil); err != nil {
		return fmt.Errorf("consumingManager: taking %s on: %w", tp, err)
	}
	timeout := testwait.Timeout(c.t)
	if !caughtUp(c.PgManager).Until(timeout, func() bool { return rstest.Loaded(c.PgManager, tp) }) {
		return fmt.Errorf("consumingManager: %s not loaded within %v", tp, timeout)
	}
	return nil
}

func (c *consumingManager) AddRemoteLogSegmentMetadata(ctx context.Context, m rs.RemoteLogSegmentMetadata) error {
	if err := c.consume(m.SegmentID.TopicIDPartition); err != nil {
		return err
	}
	return c.PgManager.AddRemoteLogSegmentMetadata(ctx, m)
}

func (c *consumingManager) UpdateRemoteLogSegmentMetadata(ctx context.Context, u rs.RemoteLogSegmentMetadataUpdate) error {
	if err := c.consume(u.SegmentID.TopicIDPartition); err != nil {
		return err
	}
	return c.PgManager.UpdateRemoteLogSegmentMetadata(ctx, u)
}

func (c *consumingManager) RemoteLogSegmentMetadata(ctx context.Context, tp rs.TopicIDPartition, e rs.LeaderEpoch, o int64) (rs.RemoteLogSegmentMetadata, bool, error) {
	if err := c.consume(tp); err != nil {
		return rs.RemoteLogSegmentMetadata{}, false, err
	}
	return c.PgManager.RemoteLogSegmentMetadata(ctx, tp, e, o)
}

func (c *consumingManager) HighestOffsetForEpoch(ctx context.Context, tp rs.TopicIDPartition, e rs.LeaderEpoch) (int64, bool, error) {
	if err := c.consume(tp); err != nil {
		return 0, false, err
	}
	return c.PgManager.HighestOffsetForEpoch(ctx, tp, e)
}

func (c *consumingManager) ListRemoteLogSegments(ctx context.Context, tp rs.TopicIDPartition) ([]rs.RemoteLogSegmentMetadata, error) {
	if err := c.consume(tp); err != nil {
		return nil, err
	}
	return c.PgManager.ListRemoteLogSegments(ctx, tp)
}

func (c *consumingManager) ListRemoteLogSegmentsByEpoch(ctx context.Context, tp rs.TopicIDPartition, e rs.LeaderEpoch) ([]rs.RemoteLogSegmentMetadata, error) {
	if err := c.consume(tp); err != nil {
		return nil, err
	}
	return c.PgManager.ListRemoteLogSegmentsByEpoch(ctx, tp, e)
}

func (c *consumingManager) PutRemotePartitionDeleteMetadata(ctx context.Context, d rs.RemotePartitionDeleteMetadata) error {
	if err := c.consume(d.TopicIDPartition); err != nil {
		return err
	}
	return c.PgManager.PutRemotePartitionDeleteMetadata(ctx, d)
}

func (c *consumingManager) CaughtUp(ctx context.Context, tp rs.TopicIDPartition) (bool, error) {
	if err := c.consume(tp); err != nil {
		return false, err
	}
	return c.PgManager.CaughtUp(ctx, tp)
}

func (c *consumingManager) RemoteLogSize(ctx context.Context, tp rs.TopicIDPartition, e rs.LeaderEpoch) (int64, error) {
	if err := c.consume(tp); err != nil {
		return 0, err
	}
	return c.PgManager.RemoteLogSize(ctx, tp, e)
}

func (c *consumingManager) NextSegmentWithTxnIndex(ctx context.Context, tp rs.TopicIDPartition, e rs.LeaderEpoch, o int64) (rs.RemoteLogSegmentMetadata, bool, error) {
	if err := c.consume(tp); err != nil {
		return rs.RemoteLogSegmentMetadata{}, false, err
	}
	return c.PgManager.NextSegmentWithTxnIndex(ctx, tp, e, o)
}

func (c *consumingManager) FirstSegmentForTimestamp(ctx context.Context, tp rs.TopicIDPartition, e rs.LeaderEpoch, ts, o int64) (rs.RemoteLogSegmentMetadata, bool, error) {
	if err := c.consume(tp); err != nil {
		return rs.RemoteLogSegmentMetadata{}, false, err
	}
	return c.PgManager.FirstSegmentForTimestamp(ctx, tp, e, ts, o)
}

func (c *consumingManager) EpochEndOffset(ctx context.Context, tp rs.TopicIDPartition, e rs.LeaderEpoch) (int64, bool, error) {
	if err := c.consume(tp); err != nil {
		return 0, false, err
	}
	return c.PgManager.EpochEndOffset(ctx, tp, e)
}

func (c *consumingManager) PartitionDeleteState(ctx context.Context, tp rs.TopicIDPartition) (rs.RemotePartitionDeleteState, bool, error) {
	if err := c.consume(tp); err != nil {
		return 0, false, err
	}
	return c.PgManager.PartitionDeleteState(ctx, tp)
}
