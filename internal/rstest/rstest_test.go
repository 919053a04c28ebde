package rstest_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/plancheck"
	"github.com/krabka/remotestorage/internal/rstest"
)

// The counter counts every statement and keeps the queries' text and
// arguments, unless CountOnly; Take starts again from zero.
func TestStatementCounter(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	for _, countOnly := range []bool{false, true} {
		counter := &rstest.StatementCounter{CountOnly: countOnly}
		cfg, err := pgxpool.ParseConfig(dsn)
		require.NoError(t, err)
		cfg.ConnConfig.Tracer = counter
		pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		var one int
		require.NoError(t, pool.QueryRow(t.Context(), "SELECT $1::integer", 1).Scan(&one))
		n, queries := counter.Take()
		require.Positive(t, n)
		if countOnly {
			require.Empty(t, queries)
		} else {
			require.Equal(t, []plancheck.Statement{{SQL: "SELECT $1::integer", Args: []any{1}}}, queries[len(queries)-1:])
		}
		n, queries = counter.Take()
		require.Zero(t, n)
		require.Empty(t, queries)
	}
}

// LoadEpoch's partition loads into a cache, which WaitLoaded waits for, and
// answers as the library would have written it.
func TestLoadEpochAndWaitLoaded(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	tp := rstest.TP(0)
	rstest.LoadEpoch(t, pool, tp, 100)
	m, err := rs.NewPgManager(t.Context(), pool, rs.WithCache())
	require.NoError(t, err)
	t.Cleanup(m.Close)
	require.NoError(t, m.OnPartitionLeadershipChanges(t.Context(), []rs.TopicIDPartition{tp}, nil))
	rstest.WaitLoaded(t, m, tp)
	require.True(t, rstest.Loaded(m, tp))
	got, ok, err := m.RemoteLogSegmentMetadata(t.Context(), tp, 3, 5050)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(5000), got.StartOffset)
	require.Equal(t, rs.CopySegmentFinished, got.State)

	s := rstest.Segment(tp, 10_000, 10_089, map[rs.LeaderEpoch]int64{4: 10_000})
	require.NoError(t, m.AddRemoteLogSegmentMetadata(t.Context(), s))
	require.NoError(t, m.UpdateRemoteLogSegmentMetadata(t.Context(), rstest.Update(s, rs.CopySegmentFinished)))
	highest, ok, err := m.HighestOffsetForEpoch(t.Context(), tp, 4)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(10_089), highest)
}

// TestMain gives the tests pgtest's server, stopped when they are done.
func TestMain(m *testing.M) { pgtest.Main(m) }
