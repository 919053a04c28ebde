package migrations_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/rstest"
	"github.com/krabka/remotestorage/internal/testwait"
)

// Every write bumps its partition's row. Those updates must be HOT (no new
// index entries, the row's versions on one page): no index of
// rlmm_partitions may cover a column that a write changes (version,
// max_segment_span, updated_at).
func TestPartitionRowUpdatesAreHOT(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(t.Context(), dsn)
	require.NoError(t, err)
	m, err := rs.NewPgManager(t.Context(), pool)
	require.NoError(t, err)
	tp := rstest.TP(0)
	const segments = 50
	for i := range int64(segments) {
		rstest.WriteFinished(t, m, tp, i*100, i*100+99)
	}
	m.Close()
	pool.Close() // the backends flush their statistics as they exit

	admin := rstest.NewPool(t, dsn, 0, false)
	var updates, hot int64
	testwait.Until(t, "the writers' statistics reach pg_stat_user_tables", func() bool {
		require.NoError(t, admin.QueryRow(t.Context(),
			"SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'rlmm_partitions'").Scan(&updates, &hot))
		return updates >= 2*segments-1
	})
	require.GreaterOrEqual(t, hot, updates*9/10, "of %d updates of the partition row, %d were HOT", updates, hot)
}
