package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/rstest"
)

// BenchmarkColdStart is what a write and a query cost on a connection that
// has just been opened (a pool that grew, a connection past its lifetime, a
// failover), next to the same on a warm connection and to the baseline: a
// raw single-row UPDATE as a new connection's first statement, in the same
// run. Each op of a cold row closes the pool's connections and opens a new
// one outside the timer, then times one call: the connect is not counted,
// the first statement's preparing, planning and catalog loading are. A
// ConfigurePool pool warms a new connection once it has served the
// manager's first call on it: its cold rows time the call after that
// warm-up (a lookup, then the warm-up, untimed here as the connect is).
// The rows "connect counted" time the connect and the connection's first
// call: the warm-up that follows is on no caller's path, and the timer
// waits for none.
//
//	go test -run '^$' -bench '^BenchmarkColdStart$' -benchtime 200x ./bench
//
// The target: a cold write, and a cold query, cost at most twice the raw
// cold UPDATE.
func BenchmarkColdStart(b *testing.B) {
	ctx := context.Background()
	dsn := pgtest.NewDatabase(b)
	setup := rstest.NewPool(b, dsn, 1, false)
	_, err := setup.Exec(ctx, `
CREATE TABLE bench_raw (id integer PRIMARY KEY, event_timestamp_ms bigint NOT NULL, pad text NOT NULL);
INSERT INTO bench_raw SELECT g, 0, repeat('x', 150) FROM generate_series(0, 1999) g;
ANALYZE bench_raw;`)
	require.NoError(b, err)
	adder, err := rs.NewPgManager(ctx, setup)
	require.NoError(b, err)
	b.Cleanup(adder.Close)
	tp := rstest.TP(0)
	var offset int64
	// added is a new segment in COPY_SEGMENT_STARTED for the timed update.
	added := func() rs.RemoteLogSegmentMetadata {
		s := rstest.Segment(tp, offset, offset+99, map[rs.LeaderEpoch]int64{0: offset})
		offset += 100
		require.NoError(b, adder.AddRemoteLogSegmentMetadata(ctx, s))
		return s
	}
	require.NoError(b, adder.UpdateRemoteLogSegmentMetadata(ctx, rstest.Update(added(), rs.CopySegmentFinished))) // the one looked up

	plain := rstest.NewPool(b, dsn, 1, false)
	configured := rstest.NewPool(b, dsn, 1, true)
	var pool *pgxpool.Pool
	var m *rs.PgManager
	var countConnect bool
	managers := map[*pgxpool.Pool]*rs.PgManager{}
	for _, p := range []*pgxpool.Pool{plain, configured} {
		managers[p], err = rs.NewPgManager(ctx, p)
		require.NoError(b, err)
		b.Cleanup(managers[p].Close)
	}
	// acquireRelease takes the pool's connection and gives it back: it
	// waits for a warm-up running on it.
	acquireRelease := func(b *testing.B) {
		c, err := pool.Acquire(ctx)
		require.NoError(b, err)
		c.Release()
	}
	// reconnect replaces the pool's connection by a new one, untimed (but
	// for the connect of the rows that count it).
	reconnect := func(b *testing.B) {
		b.StopTimer()
		acquireRelease(b) // the warm-up of the connection it replaces ends
		pool.Reset()
		if countConnect {
			b.StartTimer()
			return
		}
		if pool == configured { // its first call, then its warm-up
			_, _, err := m.RemoteLogSegmentMetadata(ctx, tp, 0, 50)
			require.NoError(b, err)
		}
		acquireRelease(b)
		b.StartTimer()
	}
	finish := func(b *testing.B, cold bool) {
		b.StopTimer()
		s := added()
		b.StartTimer()
		if cold {
			reconnect(b)
		}
		require.NoError(b, m.UpdateRemoteLogSegmentMetadata(ctx, rstest.Update(s, rs.CopySegmentFinished)))
	}
	lookup := func(b *testing.B, cold bool) {
		if cold {
			reconnect(b)
		}
		_, found, err := m.RemoteLogSegmentMetadata(ctx, tp, 0, 50)
		require.NoError(b, err)
		require.True(b, found)
	}
	raw := func(b *testing.B, cold bool) {
		if cold {
			reconnect(b)
		}
		_, err := pool.Exec(ctx, "UPDATE bench_raw SET event_timestamp_ms = $2 WHERE id = $1", int(offset%2000), time.Now().UnixNano())
		require.NoError(b, err)
	}
	for _, c := range []struct {
		name    string
		op      func(b *testing.B, cold bool)
		cold    bool
		pool    *pgxpool.Pool
		connect bool // the connect timed
	}{
		{"raw UPDATE cold", raw, true, plain, false},
		{"library write cold, plain pool", finish, true, plain, false},
		{"library query cold, plain pool", lookup, true, plain, false},
		{"library write cold, ConfigurePool", finish, true, configured, false},
		{"library query cold, ConfigurePool", lookup, true, configured, false},
		{"raw UPDATE cold, connect counted", raw, true, plain, true},
		{"library write cold, plain pool, connect counted", finish, true, plain, true},
		{"library write cold, ConfigurePool, connect counted", finish, true, configured, true},
		{"raw UPDATE warm", raw, false, plain, false},
		{"library write warm", finish, false, plain, false},
		{"library query warm", lookup, false, plain, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			pool, m, countConnect = c.pool, managers[c.pool], c.connect
			c.op(b, false) // warm rows start warm
			b.ResetTimer()
			for b.Loop() {
				c.op(b, c.cold)
			}
		})
	}
}
