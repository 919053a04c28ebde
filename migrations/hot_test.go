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

// The segments' writes only lock their partition's row (FOR NO KEY
// UPDATE): the row changes only when an add widens its max_segment_span, and those
// updates must be HOT (no new index entries, the row's versions on one
// page): no index of rlmm_partitions may cover max_segment_span or
// updated_at.
func TestPartitionRowUpdatesAreHOT(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(t.Context(), dsn)
	require.NoError(t, err)
	m, err := rs.NewPgManager(t.Context(), pool)
	require.NoError(t, err)
	tp := rstest.TP(0)
	const segments, widenings = 50, 4
	for i := range int64(segments) {
		span := int64(99)
		if i%(segments/widenings) == segments/widenings-1 {
			span = 99 + 100*(i+1) // longer than every segment before
		}
		rstest.WriteFinished(t, m, tp, 100_000*i, 100_000*i+span)
	}
	m.Close()
	pool.Close() // the backends flush their statistics as they exit

	admin := rstest.NewPool(t, dsn, 0, false)
	var inserted, updates, hot int64
	testwait.Until(t, "the writers' statistics reach pg_stat_user_tables", func() bool {
		require.NoError(t, admin.QueryRow(t.Context(), `
SELECT (SELECT n_tup_ins FROM pg_stat_user_tables WHERE relname = 'rlmm_segments'),
       p.n_tup_upd, p.n_tup_hot_upd FROM pg_stat_user_tables p WHERE p.relname = 'rlmm_partitions'`).Scan(&inserted, &updates, &hot))
		return inserted >= segments
	})
	require.EqualValues(t, widenings, updates, "the partition row changed only when a segment widened its span")
	require.Equal(t, updates, hot, "of %d updates of the partition row, %d were HOT", updates, hot)
}
