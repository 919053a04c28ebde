package remotestorage_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/metrics"
)

func hostileStrings() []string {
	return []string{
		"x'; DROP TABLE rlmm_segments; --",
		`x"; DELETE FROM rlmm_partitions; --`,
		"'); TRUNCATE rlmm_segment_epochs; --",
		"$1; SELECT pg_sleep(10)",
		"\\'; DROP TABLE rlmm_partitions; --",
		"a\x00b",
		"naïve",
		"%s%n%x",
	}
}

// TestOnlyBoundParametersReachSQL sends hostile topic names (which
// validation refuses in writes and which queries never use: partitions are
// identified by topic id) and hostile custom metadata, records every
// statement sent, and checks that no hostile text is ever part of the SQL,
// that the metadata went as a parameter and came back verbatim, and that the
// tables are intact.
func TestOnlyBoundParametersReachSQL(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, rec := newCountingPool(t, pgtest.NewDatabase(t))
	m, err := rs.NewPgManager(ctx, pool)
	require.NoError(t, err)

	for _, hostile := range hostileStrings() {
		tp := testTP(0)
		tp.Topic = hostile
		s := segment(tp, 0, 9, map[rs.LeaderEpoch]int64{0: 0})
		require.ErrorIs(t, m.AddRemoteLogSegmentMetadata(ctx, s), rs.ErrInvalidAdd, hostile)
		require.ErrorIs(t, m.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{TopicIDPartition: tp}), rs.ErrInvalidPartitionDeleteTransition)
		// Queries and updates take the topic name but identify by topic id.
		require.ErrorIs(t, m.UpdateRemoteLogSegmentMetadata(ctx, update(s, rs.CopySegmentFinished)), rs.ErrSegmentNotFound)
		list, err := m.ListRemoteLogSegments(ctx, tp)
		require.NoError(t, err)
		require.Empty(t, list)
		_, _, err = m.RemoteLogSegmentMetadata(ctx, tp, 0, 0)
		require.NoError(t, err)

		// Hostile bytes as custom metadata, in an add and an update.
		tp.Topic = "orders"
		s = segment(tp, 0, 9, map[rs.LeaderEpoch]int64{0: 0})
		s.CustomMetadata = []byte(hostile)
		require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, s))
		u := update(s, rs.CopySegmentFinished)
		u.CustomMetadata = []byte("u" + hostile)
		require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, u))
		got, found, err := m.RemoteLogSegmentMetadata(ctx, tp, 0, 5)
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, u.CustomMetadata, got.CustomMetadata)
	}
	_, statements := rec.Take()
	require.NotEmpty(t, statements)
	var sawMetadata bool
	for _, st := range statements {
		for _, hostile := range hostileStrings() {
			require.NotContains(t, st.SQL, hostile, "hostile text reached the SQL")
			require.NotContains(t, st.SQL, strings.ReplaceAll(hostile, "'", "''"), "hostile text reached the SQL, quoted")
		}
		for _, arg := range st.Args {
			if b, ok := arg.([]byte); ok && bytes.Equal(b, []byte(hostileStrings()[0])) {
				sawMetadata = true
			}
		}
	}
	require.True(t, sawMetadata, "the custom metadata should travel as a bound parameter")

	var tables int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename IN ('rlmm_partitions', 'rlmm_segments', 'rlmm_segment_epochs')").Scan(&tables))
	require.Equal(t, 3, tables)
}

// TestCustomMetadataStoredVerbatim: any bytes, of any length up to the
// limit, come back exactly as given; an empty slice stays empty and nil
// stays none.
func TestCustomMetadataStoredVerbatim(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	m, err := rs.NewPgManager(ctx, pgtest.NewPool(t))
	require.NoError(t, err)
	every := make([]byte, 256)
	for i := range every {
		every[i] = byte(i)
	}
	big := bytes.Repeat(every, rs.DefaultMaxCustomMetadataBytes/256)
	values := [][]byte{
		nil, {}, {0}, {0, 0, 0}, every, big, []byte("\xff\xfe\xfd"), []byte(`\x00`), []byte("E'\\\\x41'"),
		[]byte("'; DROP TABLE rlmm_segments; --"), []byte("\u202e\u0000\U0001F600"),
	}
	tp := testTP(0)
	for i, v := range values {
		s := segment(tp, int64(i)*10, int64(i)*10+9, map[rs.LeaderEpoch]int64{0: int64(i) * 10})
		s.CustomMetadata = v
		require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, s))
		list, err := m.ListRemoteLogSegmentsByEpoch(ctx, tp, 0)
		require.NoError(t, err)
		got := list[len(list)-1]
		require.Equal(t, s.SegmentID, got.SegmentID)
		requireVerbatim(t, v, got.CustomMetadata)

		// An update with metadata replaces it verbatim; one with nil keeps it.
		u := update(s, rs.CopySegmentFinished)
		u.CustomMetadata = values[len(values)-1-i]
		require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, u))
		found, ok, err := m.RemoteLogSegmentMetadata(ctx, tp, 0, s.StartOffset)
		require.NoError(t, err)
		require.True(t, ok)
		want := u.CustomMetadata
		if want == nil {
			want = v
		}
		requireVerbatim(t, want, found.CustomMetadata)
	}
}

func requireVerbatim(t *testing.T, want, got []byte) {
	t.Helper()
	require.True(t, bytes.Equal(want, got), "want %q, got %q", want, got)
	require.Equal(t, want == nil, got == nil, "want %#v, got %#v", want, got)
}

// TestDSNPasswordNeverInErrors: whatever fails, from parsing the DSN to a
// write whose connection cannot be made, neither the error nor the log
// record of it (Instrument, WithLogger) carries the password. rlmmctl's
// output is checked by cmd/rlmmctl's TestPasswordNeverPrinted.
func TestDSNPasswordNeverInErrors(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const pw = "Pa55-w0rd-s3cr3t"
	var errs []error

	// Unparsable DSNs, in every spelling of the password libpq accepts:
	// spaces or tabs around '=', quoted (with a space inside), an upper-case
	// keyword, a URL's userinfo or query, the TLS key's password.
	for _, dsn := range []string{
		"postgres://rlmm:" + pw + "@127.0.0.1:notaport/rlmm",
		"host=127.0.0.1 port=notaport user=rlmm password=" + pw,
		"postgres://rlmm:" + pw + "@127.0.0.1:5432/rlmm?sslmode=nonsense",
		"host=127.0.0.1 port=notaport user=rlmm password = " + pw,
		"host=127.0.0.1 port=notaport user=rlmm password =" + pw,
		"host=127.0.0.1 port=notaport user=rlmm password= " + pw,
		"host=127.0.0.1 user=rlmm\tpassword\t=\t" + pw + " sslmode=nonsense",
		"host=127.0.0.1 port=notaport user=rlmm password = '" + pw + " x'",
		"host=127.0.0.1 port=notaport user=rlmm PASSWORD=" + pw,
		"host=127.0.0.1 sslmode=nonsense sslpassword = " + pw,
		"host=127.0.0.1 port=notaport password=" + pw + "\tsslmode=require",
		"host=127.0.0.1 user=rlmm password='" + pw,
		"postgres://rlmm@127.0.0.1/rlmm?password=" + pw + "&port=notaport",
		"postgres://rlmm@127.0.0.1/rlmm?password%20=" + pw + "&port=notaport",
		"postgres://rlmm:" + pw + "/x@127.0.0.1:notaport/rlmm",
	} {
		_, err := rs.NewPool(ctx, dsn)
		require.Error(t, err, dsn)
		require.NotContains(t, err.Error(), pw, "the error of NewPool(%q)", dsn)
		errs = append(errs, err)
		_, err = pgxpool.ParseConfig(dsn)
		require.Error(t, err)
	}

	// Nobody listens: NewPgManager and Migrate fail to connect.
	closed, err := rs.NewPool(ctx, "postgres://rlmm:"+pw+"@127.0.0.1:1/rlmm?sslmode=disable&connect_timeout=5")
	require.NoError(t, err)
	defer closed.Close()
	_, err = rs.NewPgManager(ctx, closed)
	require.ErrorIs(t, err, rs.ErrIO)
	errs = append(errs, err)
	err = rs.Migrate(ctx, closed)
	require.ErrorIs(t, err, rs.ErrIO)
	errs = append(errs, err)

	// A manager whose connections start failing: writes and queries.
	dsn, secret := withPassword(t, pgtest.NewDatabase(t), pw)
	cfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(t, err)
	var failDials atomic.Bool
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if failDials.Load() {
			return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
		}
		return dial(ctx, network, addr)
	}
	rs.ConfigurePool(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	pm, err := rs.NewPgManager(ctx, pool, rs.WithLogger(logger))
	require.NoError(t, err)
	m := metrics.Instrument(pm, metrics.WithLogger(logger)) // logs every failed call
	failDials.Store(true)
	pool.Reset()
	tp := testTP(0)
	s := segment(tp, 0, 9, map[rs.LeaderEpoch]int64{0: 0})
	for range 2 { // the second one meets the connect backoff
		err = m.AddRemoteLogSegmentMetadata(ctx, s)
		require.ErrorIs(t, err, rs.ErrIO)
		errs = append(errs, err)
	}
	_, err = m.ListRemoteLogSegments(ctx, tp)
	require.ErrorIs(t, err, rs.ErrIO)
	errs = append(errs, err)
	require.Contains(t, logs.String(), "store failure")
	require.NotContains(t, logs.String(), pw)
	require.NotContains(t, logs.String(), secret)

	for _, err := range errs {
		require.NotContains(t, err.Error(), pw)
		require.NotContains(t, err.Error(), secret)
	}
}

// withPassword returns dsn with password pw added, and the password the DSN
// now carries: pw, or the one it had already (a DATABASE_URL server). The
// local test server trusts local connections and ignores it.
func withPassword(t *testing.T, dsn, pw string) (string, string) {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	require.NoError(t, err)
	if cfg.Password != "" {
		return dsn, cfg.Password
	}
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		user := "postgres://" + cfg.User + "@"
		if !strings.HasPrefix(dsn, user) {
			t.Fatalf("unexpected DSN form %q", dsn)
		}
		return "postgres://" + cfg.User + ":" + pw + "@" + strings.TrimPrefix(dsn, user), pw
	}
	return dsn + " password=" + pw, pw
}
