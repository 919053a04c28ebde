package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage/internal/pgcluster"
)

// probeConfig is what rlmmd --health-probe reads, for the rlmmd at listen.
func probeConfig(t *testing.T, args ...string) config {
	t.Helper()
	cfg, err := parseConfig(append([]string{"--health-probe"}, args...), func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	return cfg
}

// TestHealthProbe: the probe exits 0 while rlmmd serves, on TCP and on a
// unix socket, and 1 once it stopped or where nothing listens.
func TestHealthProbe(t *testing.T) {
	t.Parallel()
	b := startDaemon(t, nil)
	var out strings.Builder
	require.Equal(t, 0, probe(probeConfig(t, "--listen", b.d.Addr()), &out), out.String())
	require.Contains(t, out.String(), "SERVING")

	sock := filepath.Join(t.TempDir(), "rlmmd.sock")
	u := startDaemon(t, func(c *config) { c.listen = "unix:" + sock })
	require.Equal(t, 0, probe(probeConfig(t, "--listen", "unix:"+sock), io.Discard))

	b.d.Stop()
	out.Reset()
	require.Equal(t, 1, probe(probeConfig(t, "--listen", b.d.Addr(), "--health-probe-timeout", "2s"), &out))
	require.Contains(t, out.String(), b.d.Addr())
	u.d.Stop()
	require.Equal(t, 1, probe(probeConfig(t, "--listen", "unix:"+sock, "--health-probe-timeout", "2s"), io.Discard))
}

// TestHealthProbeMutualTLS: behind --tls-client-ca the probe is served with
// --health-probe-cert and refused without it, and it trusts only the
// certificate rlmmd serves.
func TestHealthProbeMutualTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, err := pgcluster.NewCA("rlmmd probe CA")
	require.NoError(t, err)
	srvCert, srvKey, err := ca.Issue("rlmmd.example", "192.0.2.1") // names the probe does not dial
	require.NoError(t, err)
	cliCert, cliKey, err := ca.IssueClient("probe")
	require.NoError(t, err)
	otherCert, _, err := ca.Issue("localhost", "127.0.0.1")
	require.NoError(t, err)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o600))
		return p
	}
	srvCertFile, srvKeyFile := write("srv.crt", srvCert), write("srv.key", srvKey)
	b := startDaemon(t, func(c *config) {
		c.tlsCert, c.tlsKey = srvCertFile, srvKeyFile
		c.tlsClientCA = write("ca.crt", ca.CertPEM())
	})
	tlsArgs := []string{"--listen", b.d.Addr(), "--tls-cert", srvCertFile, "--tls-key", srvKeyFile, "--health-probe-timeout", "5s"}
	client := []string{"--health-probe-cert", write("cli.crt", cliCert), "--health-probe-key", write("cli.key", cliKey)}

	var out strings.Builder
	require.Equal(t, 0, probe(probeConfig(t, append(tlsArgs, client...)...), &out), out.String())
	out.Reset()
	require.Equal(t, 1, probe(probeConfig(t, tlsArgs...), &out), "no client certificate")
	require.NotContains(t, out.String(), "SERVING")

	pinned := []string{"--listen", b.d.Addr(), "--tls-cert", write("other.crt", otherCert), "--tls-key", srvKeyFile}
	out.Reset()
	require.Equal(t, 1, probe(probeConfig(t, append(pinned, client...)...), &out), "another certificate than rlmmd's")
	require.Contains(t, out.String(), "another certificate")
}

// TestRequireDatabaseURL: with --require-database-url (or its variable) a
// missing URL is an error before anything starts; DATABASE_URL or the flag
// satisfy it, and the health probe does not need it.
func TestRequireDatabaseURL(t *testing.T) {
	t.Parallel()
	env := map[string]string{"RLMMD_REQUIRE_DATABASE_URL": "true", "PGHOST": "db.example"}
	getenv := func(k string) string { return env[k] }
	_, err := parseConfig(nil, getenv, io.Discard)
	require.ErrorContains(t, err, "no database: --require-database-url is set")
	_, err = parseConfig([]string{"--require-database-url"}, func(string) string { return "" }, io.Discard)
	require.ErrorContains(t, err, "no database")

	cfg, err := parseConfig([]string{"--database-url", "postgres://flag/db"}, getenv, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "--database-url", cfg.databaseFrom)
	env["DATABASE_URL"] = "postgres://env/db"
	cfg, err = parseConfig(nil, getenv, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "DATABASE_URL", cfg.databaseFrom)
	delete(env, "DATABASE_URL")
	_, err = parseConfig([]string{"--health-probe"}, getenv, io.Discard)
	require.NoError(t, err, "the probe needs no database")

	env["RLMMD_HEALTH_PROBE"] = "true"
	env["DATABASE_URL"] = "postgres://env/db"
	cfg, err = parseConfig(nil, getenv, io.Discard)
	require.NoError(t, err)
	require.False(t, cfg.healthProbe, "the probe is never turned on by the environment")
}
