package remotestorage_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
)

// requireFKError checks that err is PostgreSQL's foreign_key_violation.
func requireFKError(t *testing.T, err error, constraint string) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "want a PostgreSQL error, got %v", err)
	require.Equal(t, pgerrcode.ForeignKeyViolation, pgErr.Code, pgErr.Message)
	require.Equal(t, constraint, pgErr.ConstraintName, pgErr.Message)
}

// An epoch row always names an existing segment of its partition, as the
// foreign key of schema 6 kept it: a DBA's UPDATE of a segment's or an
// epoch row's identity, and an INSERT of an epoch row for a segment that
// does not exist, are refused with 23503, and the lookups keep finding the
// segment.
func TestEpochRowsKeepTheirSegment(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := newGuardFixture(t)
	id := f.addSegmentIn(t, rs.CopySegmentFinished)
	other := f.addSegmentIn(t, rs.CopySegmentFinished)

	_, err := f.pool.Exec(ctx, "UPDATE rlmm_segments SET segment_id = gen_random_uuid() WHERE segment_id = $1", id.ID)
	requireFKError(t, err, "rlmm_segments_identity")
	_, err = f.pool.Exec(ctx, "UPDATE rlmm_segments SET topic_id = $2 WHERE segment_id = $1", id.ID, other.TopicIDPartition.TopicID)
	requireFKError(t, err, "rlmm_segments_identity")
	_, err = f.pool.Exec(ctx, "UPDATE rlmm_segment_epochs SET segment_id = $2 WHERE segment_id = $1", id.ID, other.ID)
	requireFKError(t, err, "rlmm_segment_epochs_identity")
	_, err = f.pool.Exec(ctx, `
		INSERT INTO rlmm_segment_epochs (topic_id, partition, segment_id, epoch, first_offset, last_offset, state,
		    segment_start_offset, segment_end_offset, added_version, finished_version, last_version)
		VALUES ($1, 0, gen_random_uuid(), 5, 0, 9, 1, 0, 9, 1, 2, 2)`, id.TopicIDPartition.TopicID)
	requireFKError(t, err, "rlmm_segment_epochs_segment_fkey")
	// An existing segment id, in another partition, is no better.
	_, err = f.pool.Exec(ctx, `
		INSERT INTO rlmm_segment_epochs (topic_id, partition, segment_id, epoch, first_offset, last_offset, state,
		    segment_start_offset, segment_end_offset, added_version, finished_version, last_version)
		VALUES ($1, 0, $2, 5, 0, 9, 1, 0, 9, 1, 2, 2)`, id.TopicIDPartition.TopicID, other.ID)
	requireFKError(t, err, "rlmm_segment_epochs_segment_fkey")

	for _, s := range []rs.RemoteLogSegmentID{id, other} {
		got, found, err := f.m.RemoteLogSegmentMetadata(ctx, s.TopicIDPartition, 1, 50)
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, s, got.SegmentID)
	}
	// The library's own inserts, several epoch rows in one statement, pass.
	f.addSegmentIn(t, rs.CopySegmentStarted)
}

// oldCodeFinish is the COPY_SEGMENT_FINISHED statement of code of schema 2
// (queries/segments.sql SegmentUpdate before migration 00004): it bumps the
// partition, stamps the segment and its epoch rows, and does not raise
// rlmm_epoch_ends. TestMigrationsUnderLiveBrokers runs the real old code.
const oldCodeFinish = `
WITH locked_partition AS MATERIALIZED (
    SELECT p.version FROM rlmm_partitions p WHERE p.topic_id = $1 AND p.partition = $2 FOR UPDATE
), segment AS (
    UPDATE rlmm_segments AS s
    SET state = 1, broker_id = 1, event_timestamp_ms = 1,
        finished_version = coalesce(s.finished_version, (SELECT lp.version + 1 FROM locked_partition lp)),
        last_version = (SELECT lp.version + 1 FROM locked_partition lp), updated_at = now()
    WHERE s.segment_id = $3 AND s.state = ANY('{0,1}'::smallint[])
    RETURNING s.*
), partition_row AS (
    UPDATE rlmm_partitions AS p SET version = segment.last_version, updated_at = now()
    FROM segment WHERE p.topic_id = $1 AND p.partition = $2
), epochs AS (
    UPDATE rlmm_segment_epochs AS e
    SET state = 1, finished_version = segment.finished_version, last_version = segment.last_version
    FROM segment WHERE e.topic_id = $1 AND e.partition = $2 AND e.segment_id = $3
)
SELECT count(*) FROM segment`

// Segments finished by brokers still on code older than rlmm_epoch_ends
// (the rollout window of a rolling upgrade) count for EpochEndOffset and
// FirstSegmentForTimestamp, uncached and cached: a trigger raises the epoch
// ends whatever code finishes a segment.
func TestOldCodeFinishesRaiseEpochEnds(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	managers, admin := brokersOn(t, dsn, 1)
	m := managers[0]
	cached := newCachedManager(t, dsn)
	tp := testTP(0)
	require.NoError(t, cached.OnPartitionLeadershipChanges(ctx, nil, []rs.TopicIDPartition{tp}))

	first := segment(tp, 0, 99, map[rs.LeaderEpoch]int64{0: 0})
	require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, first))
	require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, update(first, rs.CopySegmentFinished)))
	waitLoaded(t, cached, tp)
	// The old broker adds as this code does, and finishes its own way.
	second := segment(tp, 100, 1099, map[rs.LeaderEpoch]int64{0: 100})
	third := segment(tp, 1100, 1199, map[rs.LeaderEpoch]int64{1: 1100})
	for _, s := range []rs.RemoteLogSegmentMetadata{second, third} {
		s.MaxTimestampMs = 500
		require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, s))
		var n int
		require.NoError(t, admin.QueryRow(ctx, oldCodeFinish, tp.TopicID, tp.Partition, s.SegmentID.ID).Scan(&n))
		require.Equal(t, 1, n)
	}

	uncached := m
	for name, mgr := range map[string]*rs.PgManager{"uncached": uncached, "cached": cached} {
		check := func() error {
			for epoch, want := range map[rs.LeaderEpoch]int64{0: 1099, 1: 1199} {
				got, found, err := mgr.EpochEndOffset(ctx, tp, epoch)
				if err != nil {
					return err
				}
				if !found || got != want {
					return errors.New(name + ": EpochEndOffset is not the finished end")
				}
			}
			for epoch, want := range map[rs.LeaderEpoch]rs.RemoteLogSegmentMetadata{0: second, 1: third} {
				got, found, err := mgr.FirstSegmentForTimestamp(ctx, tp, epoch, 400, want.StartOffset)
				if err != nil {
					return err
				}
				if !found || got.SegmentID != want.SegmentID {
					return errors.New(name + ": FirstSegmentForTimestamp misses the old code's segment")
				}
			}
			return nil
		}
		var last error
		// The uncached manager answers at once; the cached one once its
		// follower has caught up.
		caughtUp(cached).WaitUntil(t, name+" answers the old code's finishes", func() bool {
			last = check()
			return last == nil
		})
		require.NoError(t, last)
	}
}

// rlmm_raise_epoch_ends() raises the epoch ends that earlier finishes
// missed, from the epoch rows: idempotent, and each partition it changes is
// bumped to a new version, so a cache follows.
func TestRaiseEpochEndsBackfill(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	managers, admin := brokersOn(t, dsn, 1)
	m := managers[0]
	cached := newCachedManager(t, dsn)
	tp, untouched := testTP(0), testTP(1)
	require.NoError(t, cached.OnPartitionLeadershipChanges(ctx, nil, []rs.TopicIDPartition{tp}))
	for _, p := range []rs.TopicIDPartition{tp, untouched} {
		s := segment(p, 0, 99, map[rs.LeaderEpoch]int64{3: 0, 4: 50})
		require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, s))
		require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, update(s, rs.CopySegmentFinished)))
	}
	waitCaughtUp(t, cached, tp)
	// What a finish by old code before the trigger existed left: no row for
	// epoch 4, a low one for epoch 3.
	_, err := admin.Exec(ctx, "DELETE FROM rlmm_epoch_ends WHERE topic_id = $1 AND epoch = 4", tp.TopicID)
	require.NoError(t, err)
	_, err = admin.Exec(ctx, "UPDATE rlmm_epoch_ends SET end_offset = 10 WHERE topic_id = $1 AND epoch = 3", tp.TopicID)
	require.NoError(t, err)
	before, beforeUntouched := partitionVersion(t, admin, tp), partitionVersion(t, admin, untouched)

	var changed int64
	require.NoError(t, admin.QueryRow(ctx, "SELECT rlmm_raise_epoch_ends()").Scan(&changed))
	require.EqualValues(t, 1, changed)
	require.NoError(t, admin.QueryRow(ctx, "SELECT rlmm_raise_epoch_ends()").Scan(&changed))
	require.EqualValues(t, 0, changed, "idempotent")
	require.Equal(t, before+1, partitionVersion(t, admin, tp))
	require.Equal(t, beforeUntouched, partitionVersion(t, admin, untouched))

	for epoch, want := range map[rs.LeaderEpoch]int64{3: 49, 4: 99} {
		got, found, err := m.EpochEndOffset(ctx, tp, epoch)
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, want, got)
		caughtUp(cached).WaitUntil(t, "the cache sees the raised epoch end", func() bool {
			got, found, err := cached.EpochEndOffset(ctx, tp, epoch)
			require.NoError(t, err)
			return found && got == want
		})
	}
}

// The library's COPY_SEGMENT_FINISHED raises the epoch ends in its own
// statement and marks the row (epoch_ends_raised, migration 00014), so the
// trigger rlmm_segments_raise_epoch_ends does not run for it; a finish that
// does not mark the row (code older than 00014) still runs it. The trigger's
// function is replaced by one that fails, to see which finishes reach it.
func TestLibraryFinishRaisesEpochEndsOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	managers, admin := brokersOn(t, pgtest.NewDatabase(t), 1)
	m := managers[0]
	_, err := admin.Exec(ctx, `CREATE OR REPLACE FUNCTION rlmm_segments_raise_epoch_ends() RETURNS trigger
LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'rlmm_segments_raise_epoch_ends ran'; END $$`)
	require.NoError(t, err)
	tp := testTP(0)

	s := segment(tp, 0, 99, map[rs.LeaderEpoch]int64{3: 0, 4: 50})
	require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, s))
	require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, update(s, rs.CopySegmentFinished)))
	require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, update(s, rs.CopySegmentFinished)), "a retried finish")
	for epoch, want := range map[rs.LeaderEpoch]int64{3: 49, 4: 99} {
		got, found, err := m.EpochEndOffset(ctx, tp, epoch)
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, want, got, "the statement raised the epoch end itself")
	}

	old := segment(tp, 100, 199, map[rs.LeaderEpoch]int64{4: 100})
	require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, old))
	var n int
	err = admin.QueryRow(ctx, oldCodeFinish, tp.TopicID, tp.Partition, old.SegmentID.ID).Scan(&n)
	require.ErrorContains(t, err, "rlmm_segments_raise_epoch_ends ran", "old code's finish still runs the trigger")
}

// The epoch rows' copies of their segment's size and largest timestamp
// (migration 00015), which RemoteLogSize and FirstSegmentForTimestamp read,
// answer as the segment would: a row without them (written before 00015, by
// older code or by hand) is read from its segment, and a DBA's UPDATE of
// the segment reaches them.
func TestEpochRowCopiesAnswerAsTheSegment(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := newPool(t, pgtest.NewDatabase(t), 0, false)
	m := newManager(t, pool)
	tp := testTP(0)
	// Segments of 100 offsets with distinct sizes and timestamps, epoch 0
	// then 1; segment 5 carries both; segment 7 stays COPY_SEGMENT_STARTED.
	var segments []rs.RemoteLogSegmentMetadata
	for i := range int64(10) {
		epochs := map[rs.LeaderEpoch]int64{0: i * 100}
		switch {
		case i == 5:
			epochs = map[rs.LeaderEpoch]int64{0: i * 100, 1: i*100 + 50}
		case i > 5:
			epochs = map[rs.LeaderEpoch]int64{1: i * 100}
		}
		s := segment(tp, i*100, i*100+99, epochs)
		s.SegmentSizeInBytes = int32(1000 + i)
		s.MaxTimestampMs = 10_000 + 10*i
		segments = append(segments, s)
	}
	write := func(w rs.RemoteLogMetadataManager) {
		for i, s := range segments {
			require.NoError(t, w.AddRemoteLogSegmentMetadata(ctx, s))
			if i != 7 {
				require.NoError(t, w.UpdateRemoteLogSegmentMetadata(ctx, update(s, rs.CopySegmentFinished)))
			}
		}
	}
	model := rs.NewInMemoryManager()
	write(m)
	write(model)
	requireSame := func(where string) {
		t.Helper()
		for e := rs.LeaderEpoch(0); e <= 2; e++ {
			want, err := model.RemoteLogSize(ctx, tp, e)
			require.NoError(t, err)
			got, err := m.RemoteLogSize(ctx, tp, e)
			require.NoError(t, err)
			require.Equal(t, want, got, "%s: RemoteLogSize of epoch %d", where, e)
			for _, ts := range []int64{0, 10_025, 10_055, 10_071, 10_095, 99_999} {
				for _, from := range []int64{0, 260, 550, 720, 990} {
					wantSeg, wantOK, err := model.FirstSegmentForTimestamp(ctx, tp, e, ts, from)
					require.NoError(t, err)
					gotSeg, gotOK, err := m.FirstSegmentForTimestamp(ctx, tp, e, ts, from)
					require.NoError(t, err)
					require.Equal(t, wantOK, gotOK, "%s: FirstSegmentForTimestamp(%d, %d, %d)", where, e, ts, from)
					require.Equal(t, wantSeg.SegmentID, gotSeg.SegmentID, "%s: FirstSegmentForTimestamp(%d, %d, %d)", where, e, ts, from)
				}
			}
		}
	}
	requireSame("copies written by the library")

	// Rows without the copies, as older code writes them.
	tag, err := pool.Exec(ctx, `UPDATE rlmm_segment_epochs SET segment_size_bytes = NULL, max_timestamp_ms = NULL
		WHERE segment_start_offset % 200 = 0 OR segment_start_offset = 500`)
	require.NoError(t, err)
	require.EqualValues(t, 7, tag.RowsAffected()) // segments 0, 2, 4, 6 and 8, and both rows of 5
	requireSame("some rows without copies")

	// A DBA repairs a segment's size and timestamp: the copies follow.
	repaired := segments[5]
	_, err = pool.Exec(ctx, "UPDATE rlmm_segments SET segment_size_bytes = 77, max_timestamp_ms = 1 WHERE segment_id = $1", repaired.SegmentID.ID)
	require.NoError(t, err)
	var copies int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM rlmm_segment_epochs WHERE segment_id = $1 AND segment_size_bytes = 77 AND max_timestamp_ms = 1",
		repaired.SegmentID.ID).Scan(&copies))
	require.Equal(t, 2, copies, "both epoch rows of the repaired segment")
	repaired.SegmentSizeInBytes, repaired.MaxTimestampMs = 77, 1
	segments[5] = repaired
	model = rs.NewInMemoryManager()
	write(model)
	requireSame("after a DBA's repair")
}
