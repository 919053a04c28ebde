package migrations_test

import (
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/rstest"
)

// requireFKError checks that err is PostgreSQL's foreign_key_violation.
func requireFKError(t *testing.T, err error, constraint string) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "want a PostgreSQL error, got %v", err)
	require.Equal(t, pgerrcode.ForeignKeyViolation, pgErr.Code, pgErr.Message)
	require.Equal(t, constraint, pgErr.ConstraintName, pgErr.Message)
}

// An epoch row always names an existing segment, and the identity of a
// segment and of its epoch rows never changes: a DBA's UPDATE of a
// segment's or an epoch row's topic id, partition or segment id is refused
// by the identity guards (23503, <table>_identity), an INSERT of an epoch
// row for a segment id that no segment has by the foreign key (23503,
// rlmm_segment_epochs_segment_fkey), and the lookups keep finding the
// segments.
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
	_, err = f.pool.Exec(ctx, "UPDATE rlmm_segments SET partition = 1 WHERE segment_id = $1", id.ID)
	requireFKError(t, err, "rlmm_segments_identity")
	_, err = f.pool.Exec(ctx, "UPDATE rlmm_segment_epochs SET segment_id = $2 WHERE segment_id = $1", id.ID, other.ID)
	requireFKError(t, err, "rlmm_segment_epochs_identity")
	_, err = f.pool.Exec(ctx, "UPDATE rlmm_segment_epochs SET topic_id = $2 WHERE segment_id = $1", id.ID, other.TopicIDPartition.TopicID)
	requireFKError(t, err, "rlmm_segment_epochs_identity")
	_, err = f.pool.Exec(ctx, `
		INSERT INTO rlmm_segment_epochs (topic_id, partition, segment_id, epoch, first_offset, last_offset, state,
		    segment_start_offset, segment_end_offset, added_version, finished_version, last_version,
		    segment_size_bytes, max_timestamp_ms)
		VALUES ($1, 0, gen_random_uuid(), 5, 0, 9, 1, 0, 9, 1, 2, 2, 1024, 0)`, id.TopicIDPartition.TopicID)
	requireFKError(t, err, "rlmm_segment_epochs_segment_fkey")

	var epochRows int
	require.NoError(t, f.pool.QueryRow(ctx, "SELECT count(*) FROM rlmm_segment_epochs WHERE segment_id = ANY($1)",
		[]uuid.UUID{id.ID, other.ID}).Scan(&epochRows))
	require.Equal(t, 4, epochRows, "the refused writes changed no epoch row")
	for _, s := range []rs.RemoteLogSegmentID{id, other} {
		got, found, err := f.m.RemoteLogSegmentMetadata(ctx, s.TopicIDPartition, 1, 50)
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, s, got.SegmentID)
	}
	// The library's own inserts, several epoch rows in one statement, pass.
	f.addSegmentIn(t, rs.CopySegmentStarted)
}

// The epoch rows' copies of their segment's size and largest timestamp,
// which RemoteLogSize and FirstSegmentForTimestamp read, answer as the
// segment would: the library writes them with the epoch rows (segments of
// distinct sizes and timestamps, across two epochs, compared with the
// in-memory model), and a row cannot be without them (NOT NULL, 23502).
func TestEpochRowCopiesAnswerAsTheSegment(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := rstest.NewPool(t, pgtest.NewDatabase(t), 0, false)
	m := rstest.NewManager(t, pool)
	tp := rstest.TP(0)
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
		s := rstest.Segment(tp, i*100, i*100+99, epochs)
		s.SegmentSizeInBytes = int32(1000 + i)
		s.MaxTimestampMs = 10_000 + 10*i
		segments = append(segments, s)
	}
	write := func(w rs.RemoteLogMetadataManager) {
		for i, s := range segments {
			require.NoError(t, w.AddRemoteLogSegmentMetadata(ctx, s))
			if i != 7 {
				require.NoError(t, w.UpdateRemoteLogSegmentMetadata(ctx, rstest.Update(s, rs.CopySegmentFinished)))
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

	// A row without the copies is refused, in an UPDATE and in an INSERT.
	for _, column := range []string{"segment_size_bytes", "max_timestamp_ms"} {
		_, err := pool.Exec(ctx, "UPDATE rlmm_segment_epochs SET "+column+" = NULL WHERE segment_id = $1", segments[5].SegmentID.ID)
		requireNotNullViolation(t, err, column)
	}
	_, err := pool.Exec(ctx, `
		INSERT INTO rlmm_segment_epochs (topic_id, partition, segment_id, epoch, first_offset, last_offset, state,
		    segment_start_offset, segment_end_offset, added_version, finished_version, last_version, max_timestamp_ms)
		SELECT topic_id, partition, segment_id, 7, start_offset, end_offset, state,
		    start_offset, end_offset, added_version, finished_version, last_version, max_timestamp_ms
		FROM rlmm_segments WHERE segment_id = $1`, segments[5].SegmentID.ID)
	requireNotNullViolation(t, err, "segment_size_bytes")
	requireSame("after the refused writes")
}

// requireNotNullViolation checks that err is PostgreSQL's refusal of a NULL
// in column of rlmm_segment_epochs.
func requireNotNullViolation(t *testing.T, err error, column string) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "want a PostgreSQL error, got %v", err)
	require.Equal(t, pgerrcode.NotNullViolation, pgErr.Code, pgErr.Message)
	require.Equal(t, "rlmm_segment_epochs", pgErr.TableName, pgErr.Message)
	require.Equal(t, column, pgErr.ColumnName, pgErr.Message)
}
