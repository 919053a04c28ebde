package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
)

// rlmmctl works with the DSN the brokers use over verified TLS
// (sslmode=verify-full, sslrootcert), and refuses a wrong CA and a wrong
// host name, saying why.
func TestTLSVerifyFull(t *testing.T) {
	t.Parallel()
	srv := pgtest.NewTLSServer(t)
	dsn := srv.DSN("127.0.0.1", srv.CAFile)
	require.Contains(t, ok(t, dsn, "migrate", "up"), fmt.Sprintf("to %d", remotestorage.SchemaVersion))
	require.Contains(t, ok(t, dsn, "migrate", "status"), "up to date")
	ok(t, dsn, "partitions", "list")

	r := rlmmctl(t, nil, "--database-url", srv.DSN("127.0.0.1", srv.OtherCAFile), "migrate", "status")
	require.NotEqual(t, 0, r.code, r.output())
	require.Contains(t, r.stderr, "certificate signed by unknown authority")

	r = rlmmctl(t, nil, "--database-url", srv.DSN("localhost", srv.CAFile), "migrate", "status")
	require.NotEqual(t, 0, r.code, r.output())
	require.Contains(t, r.stderr, "certificate is valid for pg.remotestorage.test, not localhost")
}
