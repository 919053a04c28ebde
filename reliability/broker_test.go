package reliability_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/testwait"
)

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
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(t))
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
