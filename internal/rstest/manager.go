package rstest

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
)

// NewManager returns a PgManager with opts on pool, closed when the test
// ends.
func NewManager(t testing.TB, pool *pgxpool.Pool, opts ...rs.Option) *rs.PgManager {
	t.Helper()
	m, err := rs.NewPgManager(t.Context(), pool, opts...)
	require.NoError(t, err)
	t.Cleanup(m.Close)
	return m
}

// BrokersOn returns n managers on dsn, each over a pool of its own, and an
// admin pool of its own, all closed when the test ends.
func BrokersOn(t testing.TB, dsn string, n int) ([]*rs.PgManager, *pgxpool.Pool) {
	t.Helper()
	managers := make([]*rs.PgManager, n)
	for i := range managers {
		managers[i] = NewManager(t, NewPool(t, dsn, 0, false))
	}
	return managers, NewPool(t, dsn, 0, false)
}

// WriteFinished adds a segment of tp with offsets start..end (epoch 0)
// through m and finishes its copy.
func WriteFinished(t testing.TB, m rs.RemoteLogMetadataManager, tp rs.TopicIDPartition, start, end int64) rs.RemoteLogSegmentMetadata {
	t.Helper()
	s := Segment(tp, start, end, map[rs.LeaderEpoch]int64{0: start})
	require.NoError(t, m.AddRemoteLogSegmentMetadata(t.Context(), s))
	require.NoError(t, m.UpdateRemoteLogSegmentMetadata(t.Context(), Update(s, rs.CopySegmentFinished)))
	return s
}

// CountWrites makes the database log, through admin, every row written
// to rlmm_segments (an add or an update) and every change of a partition's
// delete record, and returns a function that counts those of tp so far:
// the writes that took effect, neither more nor fewer.
func CountWrites(t testing.TB, admin *pgxpool.Pool) func(tp rs.TopicIDPartition) int64 {
	t.Helper()
	_, err := admin.Exec(t.Context(), `
CREATE TABLE test_writes (topic_id uuid NOT NULL, partition integer NOT NULL);
CREATE FUNCTION test_log_write() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    INSERT INTO test_writes (topic_id, partition) VALUES (NEW.topic_id, NEW.partition);
    RETURN NULL;
END
$$;
CREATE TRIGGER test_segment_writes AFTER INSERT OR UPDATE ON rlmm_segments
    FOR EACH ROW EXECUTE FUNCTION test_log_write();
CREATE TRIGGER test_delete_records AFTER INSERT OR UPDATE OF delete_state ON rlmm_partitions
    FOR EACH ROW WHEN (NEW.delete_state IS NOT NULL) EXECUTE FUNCTION test_log_write();`)
	require.NoError(t, err)
	return func(tp rs.TopicIDPartition) int64 {
		t.Helper()
		var n int64
		require.NoError(t, admin.QueryRow(t.Context(),
			"SELECT count(*) FROM test_writes WHERE topic_id = $1 AND partition = $2", tp.TopicID, tp.Partition).Scan(&n))
		return n
	}
}
