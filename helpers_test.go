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
	"testing/fstest"

	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/dbuuid"
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
	testTP           = rstest.TP
	segment          = rstest.Segment
	update           = rstest.Update
	newPool          = rstest.NewPool
	newManager       = rstest.NewManager
	brokersOn        = rstest.BrokersOn
	writeFinished    = rstest.WriteFinished
	partitionVersion = rstest.PartitionVersion
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

// withNext returns the embedded migrations plus test-only next ones
// (version SchemaVersion+1, +2, …), never shipped under migrations/.
func withNext(t *testing.T, next ...string) fs.FS {
	t.Helper()
	fsys := fstest.MapFS{}
	names, err := fs.Glob(migrations.FS(), "*.sql")
	require.NoError(t, err)
	for _, name := range names {
		b, err := fs.ReadFile(migrations.FS(), name)
		require.NoError(t, err)
		fsys[name] = &fstest.MapFile{Data: b}
	}
	for i, sql := range next {
		fsys[fmt.Sprintf("%05d_upgrade_test_next_%d.sql", rs.SchemaVersion+1+int64(i), i)] = &fstest.MapFile{Data: []byte(sql)}
	}
	return fsys
}

// Waiting for a cache.

// caughtUp returns m's cache's CaughtUp signal, initialised: a test checks
// the state it waits for, then waits for the next catch-up while it does
// not hold (WaitUntil).
func caughtUp(m *rs.PgManager) *testsignal.Signal[rs.TopicIDPartition] {
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
	cfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(t, err)
	counter := &rstest.StatementCounter{}
	cfg.ConnConfig.Tracer = counter
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool, counter
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

// The guard triggers' fixture.

// guardFixture is a migrated database and a manager on it.
type guardFixture struct {
	pool *pgxpool.Pool
	m    *rs.PgManager
}

// addSegmentIn adds a segment with epochs 0 (offsets 0-19) and 1 (20-99) to
// a new partition of topic "orders" and takes it to state s, through the
// library.
func (f guardFixture) addSegmentIn(t *testing.T, s rs.RemoteLogSegmentState) rs.RemoteLogSegmentID {
	t.Helper()
	ctx := t.Context()
	id := rs.RemoteLogSegmentID{
		TopicIDPartition: rs.TopicIDPartition{TopicID: uuid.New(), Topic: "orders", Partition: 0},
		ID:               uuid.New(),
	}
	require.NoError(t, f.m.AddRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadata{
		SegmentID: id, StartOffset: 0, EndOffset: 99, SegmentSizeInBytes: 1024,
		State: rs.CopySegmentStarted, SegmentLeaderEpochs: map[rs.LeaderEpoch]int64{0: 0, 1: 20},
	}))
	for _, st := range pathTo[s] {
		require.NoError(t, f.m.UpdateRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadataUpdate{
			SegmentID: id, State: st, BrokerID: 1, EventTimestampMs: 1,
		}))
	}
	return id
}

func (f guardFixture) bookkeeping(t *testing.T, id rs.RemoteLogSegmentID) bookkeeping {
	t.Helper()
	var b bookkeeping
	require.NoError(t, f.pool.QueryRow(t.Context(), `
		SELECT p.version, s.state, s.last_version, s.finished_version,
		       array(SELECT e.state FROM rlmm_segment_epochs e WHERE e.segment_id = s.segment_id ORDER BY e.epoch),
		       array(SELECT e.finished_version FROM rlmm_segment_epochs e WHERE e.segment_id = s.segment_id ORDER BY e.epoch)
		FROM rlmm_segments s JOIN rlmm_partitions p USING (topic_id, partition)
		WHERE s.segment_id = $1`, id.ID).Scan(
		&b.partitionVersion, &b.segmentState, &b.lastVersion, &b.finishedVersion, &b.epochStates, &b.epochFinished))
	return b
}

// epochCommandIDs returns the command id, within its transaction, of the
// last write of each epoch row of the segment.
func (f guardFixture) epochCommandIDs(t *testing.T, id rs.RemoteLogSegmentID) []int64 {
	t.Helper()
	var cids []int64
	require.NoError(t, f.pool.QueryRow(t.Context(),
		"SELECT array_agg(cmin::text::bigint ORDER BY epoch) FROM rlmm_segment_epochs WHERE segment_id = $1", id.ID).Scan(&cids))
	return cids
}

func newGuardFixture(t *testing.T) guardFixture {
	t.Helper()
	pool := pgtest.NewPool(t)
	m, err := rs.NewPgManager(t.Context(), pool)
	require.NoError(t, err)
	t.Cleanup(m.Close)
	return guardFixture{pool: pool, m: m}
}

// pathTo lists the library updates that take a new segment to state s.
var pathTo = map[rs.RemoteLogSegmentState][]rs.RemoteLogSegmentState{
	rs.CopySegmentStarted:    nil,
	rs.CopySegmentFinished:   {rs.CopySegmentFinished},
	rs.DeleteSegmentStarted:  {rs.CopySegmentFinished, rs.DeleteSegmentStarted},
	rs.DeleteSegmentFinished: {rs.CopySegmentFinished, rs.DeleteSegmentStarted, rs.DeleteSegmentFinished},
}

// bookkeeping is what the library keeps beside a segment's state.
type bookkeeping struct {
	partitionVersion int64
	segmentState     int16
	lastVersion      int64
	finishedVersion  *int64
	// Per epoch row: state and finished_version.
	epochStates   []int16
	epochFinished []*int64
}

// requireGuardError checks that err is the guard's refusal, with a message
// that names what a DBA needs.
func requireGuardError(t *testing.T, err error, constraint string, mentions ...string) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "want a PostgreSQL error, got %v", err)
	require.Equal(t, pgerrcode.CheckViolation, pgErr.Code, pgErr.Message)
	require.Equal(t, constraint, pgErr.ConstraintName)
	for _, m := range mentions {
		require.Contains(t, pgErr.Message, m)
	}
}
