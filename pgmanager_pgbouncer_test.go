package remotestorage_test

// The library behind a real PgBouncer (Debian's package, 1.18) in
// transaction pooling mode, in front of the test server: the multi-broker
// races, the cache, and Migrate here; the conformance suite (with its
// randomized model-based test) in manager_test.go. The pool's DSN carries pgtest.BouncerDSNSettings
// (default_query_exec_mode=exec); docs/OPERATIONS.md says why.

import (
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/logtest"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/rstest"
	"github.com/krabka/remotestorage/internal/testwait"
)

// bouncerBrokers is a brokersFunc through PgBouncer.
func bouncerBrokers(t *testing.T, n int) ([]*rs.PgManager, *pgxpool.Pool) {
	t.Helper()
	pooled, _ := pgtest.NewBouncerDatabase(t)
	return brokersOn(t, pooled, n)
}

func TestPgBouncerBrokersConcurrentAdds(t *testing.T) {
	t.Parallel()
	testBrokersConcurrentAdds(t, bouncerBrokers)
}

func TestPgBouncerBrokersRacingTransitions(t *testing.T) {
	t.Parallel()
	testBrokersRacingTransitions(t, bouncerBrokers)
}

func TestPgBouncerBrokersPartitionDeleteRacesAdds(t *testing.T) {
	t.Parallel()
	testBrokersPartitionDeleteRacesAdds(t, bouncerBrokers)
}

func TestPgBouncerCacheCrossBroker(t *testing.T) {
	t.Parallel()
	pooled, direct := pgtest.NewBouncerDatabase(t)
	testCacheCrossBroker(t, pooled, rstest.ListenerOption(t, direct))
}

// With WithListenerConnConfig the cache hears other brokers' writes through
// notifications: its answers change with no CaughtUp call to pull them, and
// no warning is logged; nor is one by a listener straight on the server
// without the option (the probe is heard).
func TestPgBouncerCacheListenerOnSessionConnection(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pooled, direct := pgtest.NewBouncerDatabase(t)
	logger, logs := logtest.New(slog.LevelWarn)
	a := newCachedManager(t, pooled)
	b := newCachedManager(t, pooled, rstest.ListenerOption(t, direct), rs.WithLogger(logger))
	direct2 := newCachedManager(t, direct, rs.WithLogger(logger))
	for _, m := range []*rs.PgManager{b, direct2} {
		signals := m.TestSignals()
		signals.Init()
		signals.Listening.WaitUntil(t, "the listener listens (the direct one after its probe)", m.Listening)
	}
	tp := testTP(0)
	require.NoError(t, b.OnPartitionLeadershipChanges(ctx, nil, []rs.TopicIDPartition{tp}))
	waitLoaded(t, b, tp)
	requireCacheReceives(t, a, b, tp, 5, "the notification")
	require.NotContains(t, logs.String(), "WithListenerConnConfig")
}

// Without a session connection, the listener's LISTEN runs through the
// transaction pooler and hears nothing. The listener detects it with a
// probe and warns, naming the fix; CaughtUp stays honest (false until the
// cache has the write) and pulls the cache forward.
func TestPgBouncerCacheListenerThroughPoolerWarns(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pooled, _ := pgtest.NewBouncerDatabase(t)
	logger, logs := logtest.New(slog.LevelWarn)
	a := newCachedManager(t, pooled)
	b := newCachedManager(t, pooled, rs.WithLogger(logger))
	testwait.Until(t, "the listener warns that it hears nothing", func() bool {
		return strings.Contains(logs.String(), "WithListenerConnConfig")
	})
	require.Contains(t, logs.String(), "transaction pooler")
	require.Contains(t, logs.String(), "deadline exceeded", "the probe timed out, not failed")

	tp := testTP(0)
	require.NoError(t, b.OnPartitionLeadershipChanges(ctx, nil, []rs.TopicIDPartition{tp}))
	waitLoaded(t, b, tp)
	var lags []time.Duration
	for i := range int64(20) {
		s := writeFinished(t, a, tp, i*100, i*100+99)
		committed := time.Now()
		caughtUp(b).WaitUntil(t, "CaughtUp pulls the cache forward", func() bool {
			ok, err := b.CaughtUp(ctx, tp)
			require.NoError(t, err)
			if !ok {
				return false
			}
			got, found, err := b.RemoteLogSegmentMetadata(ctx, tp, 0, i*100+50)
			require.NoError(t, err)
			require.True(t, found, "CaughtUp said true without the write")
			require.Equal(t, s.SegmentID, got.SegmentID)
			require.Equal(t, rs.CopySegmentFinished, got.State, "CaughtUp said true without the write")
			return true
		})
		lags = append(lags, time.Since(committed))
	}
	t.Logf("commit to CaughtUp true, polling CaughtUp every 2 ms, no notifications: %v", lags)
}

// Without a session connection for the listener and with nobody calling
// CaughtUp, the periodic poll alone brings other brokers' writes
// into the cache, through the pooler (its statement encodes its parameters
// without knowing their types, as exec mode does).
func TestPgBouncerCachePollBringsWritesWithoutListener(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pooled, _ := pgtest.NewBouncerDatabase(t)
	logger, logs := logtest.New(slog.LevelWarn)
	a := newCachedManager(t, pooled)
	b := newCachedManager(t, pooled, rs.WithLogger(logger), rs.WithCachePollInterval(20*time.Millisecond))
	tp := testTP(0)
	require.NoError(t, b.OnPartitionLeadershipChanges(ctx, nil, []rs.TopicIDPartition{tp}))
	waitLoaded(t, b, tp)
	requireCacheReceives(t, a, b, tp, 3, "the poll")
	require.NotContains(t, logs.String(), "poll failed")
}

// requireCacheReceives has writer write n finished segments to tp, and
// requires reader's cache to hold each, read from memory, before the next
// (nothing calls CaughtUp to pull it forward): how names what brings them.
func requireCacheReceives(t *testing.T, writer, reader *rs.PgManager, tp rs.TopicIDPartition, n int64, how string) {
	t.Helper()
	for i := range n {
		s := writeFinished(t, writer, tp, i*100, i*100+99)
		caughtUp(reader).WaitUntil(t, "the reader's cache holds the write, from "+how+" alone", func() bool {
			got, found, err := reader.RemoteLogSegmentMetadata(t.Context(), tp, 0, i*100+50)
			require.NoError(t, err)
			return found && got.SegmentID == s.SegmentID && got.State == rs.CopySegmentFinished
		})
	}
}

// Why the DSN needs default_query_exec_mode=exec before PgBouncer 1.21:
// pgx's default statement cache names its prepared statements after the
// SQL, the same name on every client connection; a second client landing on
// the server connection where the first prepared it is refused.
func TestPgBouncerDefaultStatementCacheCollides(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pooled, _ := pgtest.NewBouncerDatabase(t)
	plain := strings.TrimSuffix(pooled, "&"+pgtest.BouncerDSNSettings)
	require.NotEqual(t, pooled, plain)
	var err error
	for range 5 { // the second client lands on the first one's server connection (PgBouncer reuses the last released)
		var conn *pgx.Conn
		conn, err = pgx.Connect(ctx, plain)
		require.NoError(t, err)
		var one int
		err = conn.QueryRow(ctx, "SELECT 1 WHERE $1::int > 0", 1).Scan(&one)
		conn.Close(ctx)
		if err != nil {
			break
		}
	}
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "expected the statement cache to collide, got %v", err)
	require.Equal(t, pgerrcode.DuplicatePreparedStatement, pgErr.Code)
}

// Brokers migrating one empty database at once through the transaction
// pooler serialise on goose's table lock: each migration applies once.
func TestPgBouncerMigrateConcurrent(t *testing.T) {
	t.Parallel()
	b := pgtest.Bouncer(t)
	cfg, err := pgx.ParseConfig(pgtest.NewEmptyDatabase(t))
	require.NoError(t, err)
	pool, err := pgxpool.New(t.Context(), b.URL(cfg.Database)+"&"+pgtest.BouncerDSNSettings)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = rs.Migrate(t.Context(), pool) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	requireMigratedOnce(t, pool)
}
