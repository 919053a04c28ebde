package remotestorage_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/testwait"
)

// When two writers race, the loser's refusal names the state the winner
// left, not the one the loser's snapshot saw. T1 moves a segment from
// COPY_SEGMENT_STARTED to DELETE_SEGMENT_STARTED and holds the partition
// lock; T2 asks for COPY_SEGMENT_FINISHED and waits on it. Once T1
// commits, T2 must say "DELETE_SEGMENT_STARTED to COPY_SEGMENT_FINISHED".
func TestRefusalNamesTheStateAfterTheLock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	pool := newPool(t, dsn, 0, false)
	m := newManager(t, pool)
	tp := testTP(0)
	s := segment(tp, 0, 99, map[rs.LeaderEpoch]int64{0: 0})
	require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, s))

	// T1, by hand, as the library's statement would: lock the partition,
	// move the segment and its epoch rows, stamp the write.
	t1, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer t1.Rollback(context.Background()) //nolint:errcheck // committed below
	_, err = t1.Exec(ctx, `
WITH p AS (SELECT 1 FROM rlmm_partitions WHERE topic_id = $1 AND partition = $2 FOR NO KEY UPDATE),
s AS (UPDATE rlmm_segments SET state = 2, last_version = nextval('rlmm_versions'), last_xid = pg_current_xact_id()
      WHERE segment_id = $3 AND EXISTS (SELECT FROM p) RETURNING last_version)
UPDATE rlmm_segment_epochs SET state = 2, last_version = (SELECT last_version FROM s) WHERE segment_id = $3`,
		tp.TopicID, tp.Partition, s.SegmentID.ID)
	require.NoError(t, err)

	// T2 starts while T1 holds the lock; wait until it is blocked on it.
	done := make(chan error, 1)
	go func() { done <- m.UpdateRemoteLogSegmentMetadata(ctx, update(s, rs.CopySegmentFinished)) }()
	testwait.Until(t, "T2 to wait on the partition lock", func() bool {
		select {
		case err := <-done:
			t.Fatalf("T2 returned before T1 committed: %v", err)
		default:
		}
		var waiting int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%SegmentUpdate%'`).Scan(&waiting))
		return waiting > 0
	})
	require.NoError(t, t1.Commit(ctx))

	err = <-done
	require.ErrorIs(t, err, rs.ErrInvalidSegmentTransition)
	require.Truef(t, strings.Contains(err.Error(), "DELETE_SEGMENT_STARTED to COPY_SEGMENT_FINISHED"), "the refusal names a state the segment has left: %v", err)
	require.False(t, errors.Is(err, rs.ErrIO))
}
