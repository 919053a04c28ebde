// Helpers shared by the root package's tests (those the benchmarks of
// bench/ or the tests of package migrations need too are in
// internal/rstest).

package remotestorage_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/dbuuid"
	"github.com/krabka/remotestorage/internal/partition"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/plancheck"
	"github.com/krabka/remotestorage/internal/rstest"
	"github.com/krabka/remotestorage/internal/testsignal"
	"github.com/krabka/remotestorage/internal/testwait"
	"github.com/krabka/remotestorage/migrations"
)

// Segments and updates.

// The segments, updates, pools and managers of package rstest, under the
// names the root's tests have always used.
var (
	testTP        = rstest.TP
	segment       = rstest.Segment
	update        = rstest.Update
	newPool       = rstest.NewPool
	newManager    = rstest.NewManager
	brokersOn     = rstest.BrokersOn
	writeFinished = rstest.WriteFinished
)

func ids(list []rs.RemoteLogSegmentMetadata) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = s.SegmentID.ID.String() + "/" + s.State.String()
	}
	return out
}

func expectMiss(s rs.RemoteLogSegmentMetadata, ok bool, err error) error {
	if err == nil && ok {
		return fmt.Errorf("expected a miss, got segment %d..%d", s.StartOffset, s.EndOffset)
	}
	return err
}

// Managers, pools and migrations.

// newCachedManager returns a manager WithCache over its own pool on dsn.
func newCachedManager(t *testing.T, dsn string, opts ...rs.Option) *rs.PgManager {
	t.Helper()
	return newManager(t, newPool(t, dsn, 0, false), append(opts, rs.WithCache())...)
}

func emptyPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	return newPool(t, pgtest.NewEmptyDatabase(t), 0, false)
}

// requireMigratedOnce checks that pool's database has every migration
// applied exactly once, up to SchemaVersion, and that a manager starts on it.
func requireMigratedOnce(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	var applied, latest int64
	require.NoError(t, pool.QueryRow(t.Context(),
		"SELECT count(*), max(version_id) FROM "+migrations.VersionTable+" WHERE version_id > 0").Scan(&applied, &latest))
	require.Equal(t, rs.SchemaVersion, latest)
	files, err := fs.Glob(migrations.FS(), "*.sql")
	require.NoError(t, err)
	require.EqualValues(t, len(files), applied, "each migration applied exactly once (numbers may have gaps while branches merge)")
	_, err = rs.NewPgManager(t.Context(), pool)
	require.NoError(t, err)
}

// Waiting for a cache.

// caughtUp returns m's cache's CaughtUp signal, initialised: a test checks
// the state it waits for, then waits for the next catch-up while it does
// not hold (WaitUntil).
func caughtUp(m *rs.PgManager) *testsignal.Signal[partition.TopicIDPartition] {
	signals := m.TestSignals()
	signals.Init()
	return &signals.CaughtUp
}

// waitLoaded waits until the cached partition tp has loaded. It wakes at
// each catch-up (the cache's test signal), where rstest.WaitLoaded, for
// packages without the root's test hooks, polls.
func waitLoaded(t testing.TB, m *rs.PgManager, tp rs.TopicIDPartition) {
	t.Helper()
	caughtUp(m).WaitUntil(t, "partition loaded", func() bool { return rstest.Loaded(m, tp) })
}

// waitCaughtUp waits until m says it is caught up on tp. A partition still
// loading (ErrNotReady, as on a busy machine right after it was taken on, or
// while it reloads) is not caught up yet. Without a cache (a manager
// reading a replica) there is no event to wait for, and it polls.
func waitCaughtUp(t *testing.T, m *rs.PgManager, tp rs.TopicIDPartition) {
	t.Helper()
	what := "caught up on " + tp.String()
	cond := func() bool {
		ok, err := m.CaughtUp(context.Background(), tp)
		if errors.Is(err, rs.ErrNotReady) {
			return false
		}
		require.NoError(t, err)
		return ok
	}
	if !m.Cached() {
		testwait.Until(t, what, cond)
		return
	}
	caughtUp(m).WaitUntil(t, what, cond)
}

// requireSameAnswers compares every query of got with want on tp.
func requireSameAnswers(t *testing.T, where string, want, got rs.Manager, tp rs.TopicIDPartition) {
	t.Helper()
	ctx := context.Background()
	wantList, err := want.ListRemoteLogSegments(ctx, tp)
	require.NoError(t, err)
	gotList, err := got.ListRemoteLogSegments(ctx, tp)
	require.NoError(t, err)
	require.Equal(t, ids(wantList), ids(gotList), "%s: list", where)
	for e := rs.LeaderEpoch(0); e < 4; e++ {
		wantHighest, wantOK, _ := want.HighestOffsetForEpoch(ctx, tp, e)
		gotHighest, gotOK, err := got.HighestOffsetForEpoch(ctx, tp, e)
		require.NoError(t, err)
		require.Equal(t, wantOK, gotOK, "%s: highest of epoch %d", where, e)
		require.Equal(t, wantHighest, gotHighest, "%s: highest of epoch %d", where, e)
		for o := int64(0); o < 350; o += 7 {
			wantSeg, wantOK, _ := want.RemoteLogSegmentMetadata(ctx, tp, e, o)
			gotSeg, gotOK, err := got.RemoteLogSegmentMetadata(ctx, tp, e, o)
			require.NoError(t, err)
			require.Equal(t, wantOK, gotOK, "%s: lookup epoch %d offset %d", where, e, o)
			require.Equal(t, wantSeg.SegmentID, gotSeg.SegmentID, "%s: lookup epoch %d offset %d", where, e, o)
			require.Equal(t, wantSeg.State, gotSeg.State, "%s: lookup epoch %d offset %d", where, e, o)
			require.Equal(t, string(wantSeg.CustomMetadata), string(gotSeg.CustomMetadata), "%s: lookup epoch %d offset %d", where, e, o)
		}
		wantNext, _, _ := want.NextSegmentWithTxnIndex(ctx, tp, e, 0)
		gotNext, _, err := got.NextSegmentWithTxnIndex(ctx, tp, e, 0)
		require.NoError(t, err)
		require.Equal(t, wantNext.SegmentID, gotNext.SegmentID, "%s: next with txn index, epoch %d", where, e)
	}
}

// Counting statements and reading their plans.

// newCountingPool opens a one-connection pool on dsn that counts statements.
func newCountingPool(t *testing.T, dsn string) (*pgxpool.Pool, *rstest.StatementCounter) {
	t.Helper()
	counter := &rstest.StatementCounter{}
	return newPoolCountedBy(t, dsn, counter), counter
}

// newPoolCountedBy returns a pool of one connection on dsn whose statements
// counter counts, beside those of the pools it already counts.
func newPoolCountedBy(t *testing.T, dsn string, counter *rstest.StatementCounter) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = counter
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// explain runs EXPLAIN (ANALYZE, BUFFERS) of q under plan_cache_mode, as
// plancheck.Explain does (PREPARE, then EXPLAIN EXECUTE: a prepared EXPLAIN
// plans its query with the arguments, a custom plan whatever the mode), and
// returns the JSON plan and the shared buffers it touched.
func explain(t *testing.T, pool *pgxpool.Pool, planCacheMode string, q plancheck.Statement) (string, int) {
	t.Helper()
	conn, err := pool.Acquire(t.Context())
	require.NoError(t, err)
	defer conn.Release()
	args := make([]any, len(q.Args))
	for i, a := range q.Args {
		args[i] = a
		if id, ok := a.(dbuuid.UUID); ok { // the simple protocol needs a type it can write as text
			args[i] = uuid.UUID(id)
		}
	}
	cost := plancheck.Explain(t, conn.Conn(), planCacheMode, q.SQL, args)
	return cost.Plan, cost.Buffers
}

// seqScannedTables returns the relations a JSON plan scans sequentially.
func seqScannedTables(plan string) []string {
	var tables []string
	var walk func(node map[string]any)
	walk = func(node map[string]any) {
		if node["Node Type"] == "Seq Scan" {
			tables = append(tables, fmt.Sprint(node["Relation Name"]))
		}
		children, _ := node["Plans"].([]any)
		for _, child := range children {
			walk(child.(map[string]any))
		}
	}
	var plans []struct {
		Plan map[string]any `json:"Plan"`
	}
	if err := json.Unmarshal([]byte(plan), &plans); err != nil {
		panic(err)
	}
	walk(plans[0].Plan)
	return tables
}
