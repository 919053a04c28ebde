package remotestorage_test

import (
	"crypto/x509"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
)

// The manager over verified TLS: a CA made by the test signed the server's
// certificate; sslmode=verify-full checks the chain and the host name. A
// wrong CA and a wrong host name are refused before anything is sent, each
// with an error that names the cause and matches ErrIO.
func TestTLSVerifyFull(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv := pgtest.NewTLSServer(t)

	pool, err := rs.NewPool(ctx, srv.DSN("127.0.0.1", srv.CAFile))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, rs.Migrate(ctx, pool))
	m, err := rs.NewPgManager(ctx, pool)
	require.NoError(t, err)
	t.Cleanup(m.Close)
	tp := testTP(0)
	s := writeFinished(t, m, tp, 0, 99)
	got, found, err := m.RemoteLogSegmentMetadata(ctx, tp, 0, 50)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, s.SegmentID, got.SegmentID)
	var ssl bool
	var version string
	require.NoError(t, pool.QueryRow(ctx, "SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl, &version))
	require.True(t, ssl, "the connection is encrypted")
	t.Logf("connection: %s", version)

	refused := func(t *testing.T, dsn string) error {
		t.Helper()
		pool := newPool(t, dsn, 0, false)
		_, err = rs.NewPgManager(ctx, pool)
		require.Error(t, err)
		require.ErrorIs(t, err, rs.ErrIO)
		return err
	}
	t.Run("wrong CA", func(t *testing.T) {
		err := refused(t, srv.DSN("127.0.0.1", srv.OtherCAFile))
		var unknown x509.UnknownAuthorityError
		require.True(t, errors.As(err, &unknown), "want an x509.UnknownAuthorityError, got %v", err)
		require.ErrorContains(t, err, "certificate signed by unknown authority")
	})
	t.Run("wrong host name", func(t *testing.T) {
		err := refused(t, srv.DSN("localhost", srv.CAFile))
		var wrongHost x509.HostnameError
		require.True(t, errors.As(err, &wrongHost), "want an x509.HostnameError, got %v", err)
		require.ErrorContains(t, err, "not localhost")
	})
}
