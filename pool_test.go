package remotestorage_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/logtest"
	"github.com/krabka/remotestorage/internal/pgtest"
)

// TestNewPgManagerWarnsOfAPlainPool: a pool whose connections die when a
// context interrupts a statement gets a warning naming ConfigurePool; one
// built by NewPool does not.
func TestNewPgManagerWarnsOfAPlainPool(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	for _, c := range []struct {
		name  string
		pool  func() (*pgxpool.Pool, error)
		warns bool
	}{
		{"pgxpool.New", func() (*pgxpool.Pool, error) { return pgxpool.New(ctx, dsn) }, true},
		{"NewPool", func() (*pgxpool.Pool, error) { return rs.NewPool(ctx, dsn) }, false},
	} {
		pool, err := c.pool()
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		logger, logs := logtest.New(slog.LevelInfo)
		m, err := rs.NewPgManager(ctx, pool, rs.WithLogger(logger))
		require.NoError(t, err)
		m.Close()
		require.Equal(t, c.warns, bytes.Contains([]byte(logs.String()), []byte("ConfigurePool")), "%s: %s", c.name, logs.String())
	}
}

// TestConfigurePoolWarmsNewConnections: a ConfigurePool pool runs the
// manager's statements once on each new connection after the manager's
// first call on it, storing nothing, and before the connection serves
// another call: the first call on a new connection prepares only its own
// statement, and the next add, finish and lookup prepare nothing more; a
// connection to a database not migrated yet still connects.
func TestConfigurePoolWarmsNewConnections(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := newPool(t, pgtest.NewDatabase(t), 1, true)
	m := newManager(t, pool)
	prepared := func() (n int) {
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM pg_prepared_statements", pgx.QueryExecModeSimpleProtocol).Scan(&n))
		return n
	}

	pool.Reset() // a new connection
	require.Zero(t, prepared(), "the new connection prepared statements before the manager's first call")
	tp := testTP(0)
	_, _, err := m.HighestOffsetForEpoch(ctx, tp, 0) // its first call
	require.NoError(t, err)
	warmed := prepared() // once the warm-up has given the connection back
	require.Greater(t, warmed, 1, "no warm-up after the first call")
	s := segment(tp, 0, 99, map[rs.LeaderEpoch]int64{0: 0})
	require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, s))
	require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, update(s, rs.CopySegmentFinished)))
	_, found, err := m.RemoteLogSegmentMetadata(ctx, tp, 0, 50)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, warmed, prepared(), "the add, finish and lookup on a warmed connection prepared statements")
	var partitions int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM rlmm_partitions").Scan(&partitions))
	require.Equal(t, 1, partitions, "the warm-up stored something")

	// A call with a context that can end warms its connection too.
	pool.Reset()
	deadline, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, _, err = m.HighestOffsetForEpoch(deadline, tp, 0)
	require.NoError(t, err)
	require.Greater(t, prepared(), 1, "no warm-up after a first call with a deadline")

	// A database without the schema: the warm-up fails quietly.
	bare := pool.Config()
	bare.ConnConfig.RuntimeParams["search_path"] = "rlmm_nothing_here"
	bare.AfterConnect = nil
	rs.ConfigurePool(bare)
	bp, err := pgxpool.NewWithConfig(ctx, bare)
	require.NoError(t, err)
	t.Cleanup(bp.Close)
	var one int
	require.NoError(t, bp.QueryRow(ctx, "SELECT 1").Scan(&one))
}
