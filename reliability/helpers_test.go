package reliability_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgcluster"
	"github.com/krabka/remotestorage/internal/pgtest"
)

// soak reports whether RELIABILITY_SOAK asks for the long runs.
func soak() bool { return os.Getenv("RELIABILITY_SOAK") != "" }

// seed returns RLMMTEST_SEED or a fresh seed, logged for reproduction.
func seed(t *testing.T) uint64 {
	t.Helper()
	if v := os.Getenv("RLMMTEST_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "RLMMTEST_SEED")
		return s
	}
	s := rand.Uint64()
	t.Logf("seed %d (reproduce with RLMMTEST_SEED=%d)", s, s)
	return s
}

// noLeaks checks, when the test and its cleanups are done, that no goroutine
// started during the test is still running. Call it first in a test that is
// not parallel, after anything long-lived the test binary keeps (the shared
// server) has started.
func noLeaks(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// sharedDatabase returns a DSN for a new migrated database on the shared
// test server, and starts the leak check.
func sharedDatabase(t *testing.T) string {
	t.Helper()
	pgtest.Server(t)
	noLeaks(t)
	return pgtest.NewDatabase(t)
}

// ownCluster starts a cluster for this test alone (it will be stopped,
// crashed, restarted), creates a migrated database "rlmm" in it and returns
// the cluster and the database's DSN. The leak check starts first, so the
// cluster is stopped before it runs.
func ownCluster(t *testing.T, opts pgcluster.Options) (*pgcluster.Cluster, string) {
	t.Helper()
	noLeaks(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgcluster.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Stop()) })
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE DATABASE rlmm")
	require.NoError(t, conn.Close(ctx))
	require.NoError(t, err)
	dsn := c.URL("rlmm")
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	defer pool.Close()
	require.NoError(t, rs.Migrate(ctx, pool))
	return c, dsn
}

// broker is one broker's connection pool and manager. Its pool is set up
// as production would set it up (remotestorage.ConfigurePool), with a dial
// counter underneath: every TCP or unix-socket connection attempt, cancel
// requests included.
type broker struct {
	pool  *pgxpool.Pool
	m     *rs.PgManager
	dials *atomic.Int64
}

type brokerConfig struct {
	maxConns int32
	plain    bool // no ConfigurePool: pgxpool's defaults, for comparison
}

func newBroker(t *testing.T, dsn string, bc brokerConfig) *broker {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(t, err)
	if bc.maxConns > 0 {
		cfg.MaxConns = bc.maxConns
	}
	dials := &atomic.Int64{}
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return dial(ctx, network, addr)
	}
	if !bc.plain {
		rs.ConfigurePool(cfg)
	}
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := rs.NewPgManager(ctx, pool)
	require.NoError(t, err)
	t.Cleanup(m.Close)
	return &broker{pool: pool, m: m, dials: dials}
}

func brokers(t *testing.T, dsn string, n int, bc brokerConfig) []*broker {
	t.Helper()
	out := make([]*broker, n)
	for i := range out {
		out[i] = newBroker(t, dsn, bc)
	}
	return out
}

func totalDials(bs []*broker) int64 {
	var n int64
	for _, b := range bs {
		n += b.dials.Load()
	}
	return n
}

// requireFaultError checks what a call may fail with while the database
// misbehaves: ErrIO, or the caller's own context error; never a refusal.
func requireFaultError(t *testing.T, err error, what string) {
	t.Helper()
	if errors.Is(err, rs.ErrIO) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		for _, refusal := range []error{rs.ErrInvalidAdd, rs.ErrSegmentNotFound, rs.ErrInvalidSegmentTransition, rs.ErrInvalidPartitionDeleteTransition, rs.ErrNotReady} {
			require.NotErrorIs(t, err, refusal, what)
		}
		return
	}
	t.Fatalf("%s: %v is neither ErrIO nor a context error", what, err)
}

func newTP(name string, partition int32) rs.TopicIDPartition {
	return rs.TopicIDPartition{TopicID: uuid.New(), Topic: name, Partition: partition}
}

// eventually polls cond every few milliseconds until it holds or timeout
// passes, and returns how long it took.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// dialBound is the most connection attempts that pools pools of maxConns
// connections, set up by ConfigurePool, may make during an outage of d: the
// connections they had and the first attempts before a failure is known
// (2 × maxConns), the probes of the first, short pauses (50 ms doubling,
// jitter halving them: 6 of them take at least 0.8 s), then one probe per
// pause of at least 0.5 s.
func dialBound(pools int, maxConns int32, d time.Duration) int64 {
	return int64(pools) * (2*int64(maxConns) + 6 + int64(d/(500*time.Millisecond)))
}

// segmentOf returns a valid segment of tp numbered i: offsets [10i, 10i+9].
func segmentOf(tp rs.TopicIDPartition, i int64) rs.RemoteLogSegmentMetadata {
	return rs.RemoteLogSegmentMetadata{
		SegmentID:           rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()},
		StartOffset:         10 * i,
		EndOffset:           10*i + 9,
		SegmentSizeInBytes:  100,
		State:               rs.CopySegmentStarted,
		SegmentLeaderEpochs: map[rs.LeaderEpoch]int64{0: 10 * i},
		TxnIndexEmpty:       true,
	}
}
