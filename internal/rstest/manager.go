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

// PartitionVersion reads tp's version in rlmm_partitions through admin.
func PartitionVersion(t testing.TB, admin *pgxpool.Pool, tp rs.TopicIDPartition) int64 {
	t.Helper()
	var v int64
	require.NoError(t, admin.QueryRow(t.Context(),
		"SELECT version FROM rlmm_partitions WHERE topic_id = $1 AND partition = $2", tp.TopicID, tp.Partition).Scan(&v))
	return v
}
