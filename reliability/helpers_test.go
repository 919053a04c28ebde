// Helpers shared by the reliability tests.

package reliability_test

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"
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
	"github.com/krabka/remotestorage/internal/testwait"
)

// Where a test's database comes from: the shared test server, or a
// cluster of its own for the tests that take the server down.

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
	ctx, cancel := context.WithTimeout(context.Background(), 2*testwait.Timeout(t))
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

// noLeaks checks, when the test and its cleanups are done, that no goroutine
// started during the test is still running. Call it first in a test that is
// not parallel, after anything long-lived the test binary keeps (the shared
// server) has started.
func noLeaks(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// Brokers: a pool set up as production sets it up, with a dial counter,
// and a manager.

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
	plain    bool        // no ConfigurePool: pgxpool's defaults, for comparison
	opts     []rs.Option // of the manager
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
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(t))
	defer cancel()
	m, err := rs.NewPgManager(ctx, pool, bc.opts...)
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

// dialBound is the most connection attempts that pools pools of maxConns
// connections, set up by ConfigurePool, may make during an outage of d: the
// connections they had and the first attempts before a failure is known
// (2 × maxConns), the probes of the first, short pauses (50 ms doubling,
// jitter halving them: 6 of them take at least 0.8 s), then one probe per
// pause of at least 0.5 s.
func dialBound(pools int, maxConns int32, d time.Duration) int64 {
	return int64(pools) * (2*int64(maxConns) + 6 + int64(d/(500*time.Millisecond)))
}

func managersOf(bs []*broker) []rs.RemoteLogMetadataManager {
	out := make([]rs.RemoteLogMetadataManager, len(bs))
	for i, b := range bs {
		out[i] = b.m
	}
	return out
}

// The partitions and segments the tests write, and the errors they expect.

// newTP is partition partition of a new topic id named name.
func newTP(name string, partition int32) rs.TopicIDPartition {
	return rs.TopicIDPartition{TopicID: uuid.New(), Topic: name, Partition: partition}
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

func sentinel(err error) error {
	for _, s := range []error{rs.ErrInvalidAdd, rs.ErrSegmentNotFound, rs.ErrInvalidSegmentTransition, rs.ErrInvalidPartitionDeleteTransition, rs.ErrNotReady, rs.ErrIO} {
		if errors.Is(err, s) {
			return s
		}
	}
	return err
}

type found struct {
	s  rs.RemoteLogSegmentMetadata
	ok bool
}

// A proxy the tests take down.

// proxy is a TCP proxy on 127.0.0.1 in front of the database, which the test
// can take down: while down, it resets every connection it carries and every
// one it is offered, as a host that went away would (connection refused or
// reset). It counts the connections it is offered.
type proxy struct {
	ln                     net.Listener
	upstreamNet, upstreamA string

	offered atomic.Int64

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func (p *proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.offered.Add(1)
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			reset(client)
			continue
		}
		p.conns[client] = true
		p.mu.Unlock()
		p.wg.Go(func() { p.serve(client) })
	}
}

func (p *proxy) serve(client net.Conn) {
	defer p.forget(client)
	upstream, err := (&net.Dialer{}).DialContext(context.Background(), p.upstreamNet, p.upstreamA)
	if err != nil {
		reset(client)
		return
	}
	p.mu.Lock()
	if p.down || !p.conns[client] {
		p.mu.Unlock()
		upstream.Close()
		reset(client)
		return
	}
	p.conns[upstream] = true
	p.mu.Unlock()
	defer p.forget(upstream)
	var both sync.WaitGroup
	both.Go(func() { _, _ = io.Copy(upstream, client); upstream.Close() })
	both.Go(func() { _, _ = io.Copy(client, upstream); client.Close() })
	both.Wait()
}

func (p *proxy) forget(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// setDown takes the proxy down (resetting what it carries) or back up.
func (p *proxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			reset(c)
			delete(p.conns, c)
		}
	}
}

func (p *proxy) close() {
	p.ln.Close()
	p.setDown(true)
	p.wg.Wait()
}

// startProxy starts a proxy to the server of dsn and returns it with a DSN
// that goes through it.
func startProxy(t *testing.T, dsn string) (*proxy, string) {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	require.NoError(t, err)
	p := &proxy{upstreamNet: "tcp", upstreamA: net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), conns: map[net.Conn]bool{}}
	if len(cfg.Host) > 0 && cfg.Host[0] == '/' {
		p.upstreamNet, p.upstreamA = "unix", cfg.Host+"/.s.PGSQL."+strconv.Itoa(int(cfg.Port))
	}
	p.ln, err = net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.wg.Go(p.accept)
	t.Cleanup(p.close)

	u := url.URL{Scheme: "postgres", User: url.User(cfg.User), Host: p.ln.Addr().String(), Path: "/" + cfg.Database, RawQuery: "sslmode=disable"}
	if cfg.Password != "" {
		u.User = url.UserPassword(cfg.User, cfg.Password)
	}
	return p, u.String()
}

// reset closes c with a TCP RST rather than a FIN.
func reset(c net.Conn) {
	if tcp, ok := c.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	c.Close()
}

// The environment: the long runs, the random seed.

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
