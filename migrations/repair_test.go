package migrations_test

// The repair functions of the baseline (docs/DBA.md, "Repairs"):
// what they change, what they refuse, and that nothing else moves.

import (
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/rstest"
)

// repairRow is what a repair may change of a segment and its partition.
type repairRow struct {
	State, EpochStates   string
	Version, LastVersion int64
	FinishedVersion      *int64
	BrokerID             int32
	DeleteState          *int16
	EpochEnd             *int64
}

func readRepairRow(t *testing.T, pool *pgxpool.Pool, s rs.RemoteLogSegmentMetadata) repairRow {
	t.Helper()
	var r repairRow
	require.NoError(t, pool.QueryRow(t.Context(), `
		SELECT st.name, (SELECT string_agg(e.state::text, ',' ORDER BY e.epoch) FROM rlmm_segment_epochs e WHERE e.segment_id = s.segment_id),
		       p.delete_version, s.last_version, s.finished_version, s.broker_id, p.delete_state,
		       (SELECT max(e.last_offset) FROM rlmm_segment_epochs e
		        WHERE e.topic_id = s.topic_id AND e.partition = s.partition AND e.epoch = 0 AND e.finished_version IS NOT NULL)
		FROM rlmm_segments s
		JOIN rlmm_segment_states st ON st.state = s.state
		JOIN rlmm_partitions p ON p.topic_id = s.topic_id AND p.partition = s.partition
		WHERE s.segment_id = $1`, s.SegmentID.ID).Scan(
		&r.State, &r.EpochStates, &r.Version, &r.LastVersion, &r.FinishedVersion, &r.BrokerID, &r.DeleteState, &r.EpochEnd))
	return r
}

// requirePgError fails unless err is a PostgreSQL error with code whose
// message contains each of parts.
func requirePgError(t *testing.T, err error, code string, parts ...string) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, code, pgErr.Code, pgErr.Message)
	for _, p := range parts {
		require.Contains(t, pgErr.Message, p)
	}
}

func TestSetSegmentStateFunction(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := rstest.NewPool(t, pgtest.NewDatabase(t), 0, false)
	m := rstest.NewManager(t, pool)
	tp := rstest.TP(0)
	started := rstest.Segment(tp, 0, 99, map[rs.LeaderEpoch]int64{0: 0, 1: 60}) // with epoch rows
	require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, started))
	before := readRepairRow(t, pool, started)
	require.Nil(t, before.EpochEnd)

	// A copy finished by hand: the library's bookkeeping, and the lookup answers.
	var version int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT rlmm_set_segment_state($1, 'copy_finished', 7)`, started.SegmentID.ID).Scan(&version))
	after := readRepairRow(t, pool, started)
	require.Greater(t, version, before.LastVersion, "the write order taken")
	require.Equal(t, repairRow{
		State: "COPY_SEGMENT_FINISHED", EpochStates: "1,1", Version: before.Version, LastVersion: version, FinishedVersion: &version,
		BrokerID: 7, EpochEnd: ptr(int64(59)),
	}, after)
	got, found, err := m.RemoteLogSegmentMetadata(ctx, tp, 0, 50)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, started.SegmentID, got.SegmentID)
	end, ok, err := m.EpochEndOffset(ctx, tp, 0)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(59), end)

	// The same state again changes nothing.
	require.NoError(t, pool.QueryRow(ctx, `SELECT rlmm_set_segment_state($1, 'COPY_SEGMENT_FINISHED')`, started.SegmentID.ID).Scan(&version))
	require.Equal(t, after, readRepairRow(t, pool, started))

	// Refusals name what is wrong and change nothing.
	for _, tc := range []struct {
		sql   string
		args  []any
		code  string
		parts []string
	}{
		{`SELECT rlmm_set_segment_state($1, 'copy_started')`, []any{started.SegmentID.ID}, pgerrcode.CheckViolation,
			[]string{started.SegmentID.ID.String(), "COPY_SEGMENT_FINISHED -> COPY_SEGMENT_STARTED is not an allowed transition", "may only move to DELETE_SEGMENT_STARTED"}},
		{`SELECT rlmm_set_segment_state($1, 'finished')`, []any{started.SegmentID.ID}, pgerrcode.InvalidParameterValue,
			[]string{`unknown segment state 'finished'`, "COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED, DELETE_SEGMENT_FINISHED"}},
		{`SELECT rlmm_set_segment_state($1, 'delete_started')`, []any{uuid.New()}, pgerrcode.NoDataFound, []string{"no segment"}},
		{`SELECT rlmm_set_segment_state($1, NULL)`, []any{started.SegmentID.ID}, pgerrcode.NullValueNotAllowedDataException, []string{"only event_timestamp_ms may be NULL"}},
	} {
		_, err := pool.Exec(ctx, tc.sql, tc.args...)
		requirePgError(t, err, tc.code, tc.parts...)
		require.Equal(t, after, readRepairRow(t, pool, started), tc.sql)
	}

	// A deleted partition's segments are forgotten: no repair moves them.
	require.NoError(t, pool.QueryRow(ctx, `SELECT rlmm_set_segment_state($1, 'delete_started')`, started.SegmentID.ID).Scan(&version))
	require.NoError(t, pool.QueryRow(ctx, `SELECT rlmm_set_segment_state($1, 'delete_finished')`, started.SegmentID.ID).Scan(&version))
	for _, st := range []string{"delete_marked", "delete_started", "delete_finished"} {
		require.NoError(t, pool.QueryRow(ctx, `SELECT rlmm_set_partition_delete_state($1, $2, $3)`, tp.TopicID, tp.Partition, st).Scan(&version))
	}
	_, err = pool.Exec(ctx, `SELECT rlmm_set_segment_state($1, 'delete_started')`, started.SegmentID.ID)
	requirePgError(t, err, pgerrcode.NoDataFound, started.SegmentID.ID.String()+" (topic orders, partition 0) is forgotten", "DELETE_PARTITION_FINISHED")
}

func TestSetPartitionDeleteStateFunction(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := rstest.NewPool(t, pgtest.NewDatabase(t), 0, false)
	m := rstest.NewManager(t, pool)
	tp := rstest.TP(3)
	rstest.WriteFinished(t, m, tp, 0, 99)
	partition := func() (version int64, state *int16, broker *int32) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT delete_version, delete_state, delete_broker_id FROM rlmm_partitions WHERE topic_id = $1 AND partition = $2`,
			tp.TopicID, tp.Partition).Scan(&version, &state, &broker))
		return
	}
	v0, _, _ := partition()

	_, err := pool.Exec(ctx, `SELECT rlmm_set_partition_delete_state($1, $2, 'delete_started')`, tp.TopicID, tp.Partition)
	requirePgError(t, err, pgerrcode.CheckViolation, "orders-3", "delete state NONE -> DELETE_PARTITION_STARTED is not an allowed transition",
		"from NONE a partition may only move to DELETE_PARTITION_MARKED")
	_, err = pool.Exec(ctx, `SELECT rlmm_set_partition_delete_state($1, $2, 'gone')`, tp.TopicID, tp.Partition)
	requirePgError(t, err, pgerrcode.InvalidParameterValue, `unknown partition delete state 'gone'`, "DELETE_PARTITION_MARKED, DELETE_PARTITION_STARTED, DELETE_PARTITION_FINISHED")
	_, err = pool.Exec(ctx, `SELECT rlmm_set_partition_delete_state($1, 9, 'delete_marked')`, tp.TopicID)
	requirePgError(t, err, pgerrcode.NoDataFound, "no partition 9 of topic id "+tp.TopicID.String())
	v, state, _ := partition()
	require.Equal(t, v0, v, "the refusals changed nothing")
	require.Nil(t, state)

	var version int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT rlmm_set_partition_delete_state($1, $2, 'DELETE_PARTITION_MARKED', 4)`, tp.TopicID, tp.Partition).Scan(&version))
	v, state, broker := partition()
	require.Greater(t, version, v0, "a new delete_version")
	require.Equal(t, version, v)
	require.Equal(t, int16(0), *state)
	require.Equal(t, int32(4), *broker)
	// The library sees the record: adds are refused.
	err = m.AddRemoteLogSegmentMetadata(ctx, rstest.Segment(tp, 100, 199, map[rs.LeaderEpoch]int64{0: 100}))
	require.Error(t, err)
}

// TestResyncFunction: rlmm_resync bumps the data generation, which every
// cache reloads at.
func TestResyncFunction(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := rstest.NewPool(t, pgtest.NewDatabase(t), 0, false)
	var before, after int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(max(generation), 0) FROM rlmm_data_generation`).Scan(&before))
	require.NoError(t, pool.QueryRow(ctx, `SELECT rlmm_resync()`).Scan(&after))
	require.Equal(t, before+1, after)
}

func ptr[T any](v T) *T { return &v }

// TestPurgeFunction: rlmm_purge is one round of the brokers' purge, from
// psql: forgotten segments go, a deleted partition's record is taken, and
// a bad argument is refused.
func TestPurgeFunction(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := rstest.NewPool(t, pgtest.NewDatabase(t), 0, false)
	m := rstest.NewManager(t, pool)
	live, deleted := rstest.TP(0), rstest.TP(1)
	kept := rstest.WriteFinished(t, m, live, 0, 99)
	gone := rstest.WriteFinished(t, m, live, 100, 199)
	for _, st := range []rs.RemoteLogSegmentState{rs.DeleteSegmentStarted, rs.DeleteSegmentFinished} {
		require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, rstest.Update(gone, st)))
	}
	rstest.WriteFinished(t, m, deleted, 0, 99)
	for _, st := range []rs.RemotePartitionDeleteState{rs.DeletePartitionMarked, rs.DeletePartitionStarted, rs.DeletePartitionFinished} {
		require.NoError(t, m.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{TopicIDPartition: deleted, State: st}))
	}

	var n int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT rlmm_purge('1 hour')`).Scan(&n))
	require.Zero(t, n, "nothing forgotten for an hour yet")
	require.NoError(t, pool.QueryRow(ctx, `SELECT rlmm_purge('0', 1)`).Scan(&n))
	require.Equal(t, int64(3), n, "a batch of 1 of each: the forgotten segment, the deleted partition's segment, then its record")
	require.NoError(t, pool.QueryRow(ctx, `SELECT rlmm_purge('0')`).Scan(&n))
	require.Zero(t, n)

	var segments []string
	rows, err := pool.Query(ctx, `SELECT segment_id::text FROM rlmm_segments ORDER BY segment_id`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		segments = append(segments, id)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{kept.SegmentID.ID.String()}, segments)
	// The deleted partition takes adds again.
	rstest.WriteFinished(t, m, deleted, 500, 599)

	for _, sql := range []string{`SELECT rlmm_purge('-1 second')`, `SELECT rlmm_purge('0', 0)`, `SELECT rlmm_purge(NULL)`} {
		_, err := pool.Exec(ctx, sql)
		requirePgError(t, err, pgerrcode.InvalidParameterValue, "older_than must be 0 or more, batch_size 1 or more")
	}
}
