//go:build opskit

package deploy_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/krabka/remotestorage/internal/pgcluster"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/testwait"
	pb "github.com/krabka/remotestorage/proto/remotestorage/v1"
)

// engine runs the container engine (podman, or docker where one answers:
// CONTAINER_ENGINE, as make ops-test sets it).
func engine(t *testing.T, args ...string) (string, error) {
	t.Helper()
	name := os.Getenv("CONTAINER_ENGINE")
	if name == "" {
		name = "podman"
	}
	// Not t.Context(): cleanups, which remove containers, run after it ends.
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(t))
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}

func rlmmdImage(t *testing.T) string {
	t.Helper()
	image := os.Getenv("RLMMD_IMAGE")
	require.NotEmpty(t, image, "RLMMD_IMAGE names the image to test: make ops-test builds it (make image-rlmmd)")
	out, err := engine(t, "image", "inspect", "--format", "{{.Config.User}} {{json .Config.Healthcheck.Test}}", image)
	require.NoError(t, err, "the image %s: %s", image, out)
	fields := strings.SplitN(strings.TrimSpace(out), " ", 2)
	require.Len(t, fields, 2, out)
	uid, _, _ := strings.Cut(fields[0], ":")
	n, err := strconv.Atoi(uid)
	require.NoError(t, err, "a numeric user: %s", fields[0])
	require.NotZero(t, n, "not root")
	require.Equal(t, `["CMD","/rlmmd","--health-probe"]`, fields[1], "the health check is rlmmd's own probe")
	return image
}

// containerDSN mounts the test database's unix socket into the container
// (the cluster's socket directory is its server's alone) and returns the
// DSN that reaches it from there, and the engine's volume argument.
func containerDSN(t *testing.T, dsn string) (string, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	q := u.Query()
	host, port := q.Get("host"), q.Get("port")
	require.True(t, strings.HasPrefix(host, "/"), "the local route's server is on a unix socket: %s", dsn)
	socket := filepath.Join(host, ".s.PGSQL."+port)
	q.Set("host", "/run/postgresql")
	u.RawQuery = q.Encode()
	return u.String(), socket + ":/run/postgresql/.s.PGSQL." + port
}

// TestImage: the image serves a broker's client against the test database,
// its health check passes, and a stop is graceful; started without a
// database URL it exits at once with rlmmd's error and the health check
// fails.
func TestImage(t *testing.T) {
	t.Parallel()
	image := rlmmdImage(t)
	dsn, volume := containerDSN(t, pgtest.NewDatabase(t))
	grpcPort, metricsPort := freePort(t), freePort(t)
	name := "rlmmd-opskit-" + uuid.NewString()[:8]
	t.Cleanup(func() { _, _ = engine(t, "rm", "-f", name) })
	// Host networking, as a sidecar of the broker on its host: rlmmd's
	// loopback is the broker's.
	out, err := engine(t, "run", "-d", "--name", name, "--network", "host", "-v", volume,
		"-e", "DATABASE_URL="+dsn,
		"-e", fmt.Sprintf("RLMMD_LISTEN=127.0.0.1:%d", grpcPort),
		"-e", fmt.Sprintf("RLMMD_METRICS_LISTEN=127.0.0.1:%d", metricsPort),
		image)
	require.NoError(t, err, out)
	logs := func() string { l, _ := engine(t, "logs", name); return l }

	testwait.Until(t, "the image's health check passes", func() bool {
		_, err := engine(t, "healthcheck", "run", name)
		return err == nil
	})
	b := dialRlmmd(t, fmt.Sprintf("127.0.0.1:%d", grpcPort))
	b.healthy(t)
	b.addAndReadBack(t)
	families := scrape(t, fmt.Sprintf("127.0.0.1:%d", metricsPort))
	v, ok := value(families, "rlmmd_serving", nil)
	require.True(t, ok && v == 1, "rlmmd_serving in the container's metrics")
	require.Contains(t, logs(), "rlmmd: serving")

	out, err = engine(t, "stop", "--time", "40", name)
	require.NoError(t, err, out)
	out, err = engine(t, "inspect", "--format", "{{.State.ExitCode}}", name)
	require.NoError(t, err, out)
	require.Equal(t, "0", strings.TrimSpace(out), "a graceful stop:\n%s", logs())
	require.Contains(t, logs(), "rlmmd: stopped")
}

// TestImageWithoutDatabaseURL: no DATABASE_URL: rlmmd exits at once with
// its error (status 2), and the health check fails.
func TestImageWithoutDatabaseURL(t *testing.T) {
	t.Parallel()
	image := rlmmdImage(t)
	port := freePort(t)
	name := "rlmmd-opskit-" + uuid.NewString()[:8]
	t.Cleanup(func() { _, _ = engine(t, "rm", "-f", name) })
	start := time.Now()
	out, err := engine(t, "run", "--name", name, "--network", "host",
		"-e", fmt.Sprintf("RLMMD_LISTEN=127.0.0.1:%d", port), image)
	elapsed := time.Since(start)
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, out)
	require.Equal(t, 2, exit.ExitCode(), out)
	require.Contains(t, out, "rlmmd: no database: --require-database-url is set, and neither --database-url nor DATABASE_URL names one")
	require.Less(t, elapsed, 20*time.Second, "at once: the container's start and rlmmd's exit")

	out, err = engine(t, "healthcheck", "run", name)
	require.Error(t, err, "the health check of the exited container: %s", out)
	// The check itself, run where nothing serves: it fails, saying why.
	out, err = engine(t, "run", "--rm", "--network", "host", "-e", fmt.Sprintf("RLMMD_LISTEN=127.0.0.1:%d", port),
		image, "--health-probe", "--health-probe-timeout", "2s")
	require.ErrorAs(t, err, &exit, out)
	require.Equal(t, 1, exit.ExitCode(), out)
	require.Contains(t, out, fmt.Sprintf("rlmmd --health-probe: 127.0.0.1:%d", port))
}

// TestImageMutualTLS: the TLS files named by the environment: with
// RLMMD_TLS_CERT, RLMMD_TLS_KEY and RLMMD_TLS_CLIENT_CA the image listens
// beyond loopback, its health check passes with the probe's certificate
// (RLMMD_HEALTH_PROBE_CERT, RLMMD_HEALTH_PROBE_KEY), and it serves a
// client with a certificate of that CA, not one without.
func TestImageMutualTLS(t *testing.T) {
	t.Parallel()
	image := rlmmdImage(t)
	dsn, volume := containerDSN(t, pgtest.NewDatabase(t))
	ca, err := pgcluster.NewCA("rlmmd image test CA")
	require.NoError(t, err)
	srvCert, srvKey, err := ca.Issue("localhost", "127.0.0.1")
	require.NoError(t, err)
	probeCert, probeKey, err := ca.IssueClient("health-probe")
	require.NoError(t, err)
	cliCert, cliKey, err := ca.IssueClient("broker-1")
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	for name, pem := range map[string][]byte{"srv.crt": srvCert, "srv.key": srvKey, "ca.crt": ca.CertPEM(), "probe.crt": probeCert, "probe.key": probeKey} {
		// Readable by the image's user: a test's throwaway keys.
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), pem, 0o644))
	}
	port := freePort(t)
	name := "rlmmd-opskit-" + uuid.NewString()[:8]
	t.Cleanup(func() { _, _ = engine(t, "rm", "-f", name) })
	out, err := engine(t, "run", "-d", "--name", name, "--network", "host", "-v", volume, "-v", dir+":/tls:ro",
		"-e", "DATABASE_URL="+dsn,
		"-e", fmt.Sprintf("RLMMD_LISTEN=0.0.0.0:%d", port),
		"-e", fmt.Sprintf("RLMMD_METRICS_LISTEN=127.0.0.1:%d", freePort(t)),
		"-e", "RLMMD_TLS_CERT=/tls/srv.crt", "-e", "RLMMD_TLS_KEY=/tls/srv.key", "-e", "RLMMD_TLS_CLIENT_CA=/tls/ca.crt",
		"-e", "RLMMD_HEALTH_PROBE_CERT=/tls/probe.crt", "-e", "RLMMD_HEALTH_PROBE_KEY=/tls/probe.key",
		image)
	require.NoError(t, err, out)
	testwait.Until(t, "the image's health check passes over mutual TLS", func() bool {
		_, err := engine(t, "healthcheck", "run", name)
		return err == nil
	})

	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(ca.CertPEM()))
	pair, err := tls.X509KeyPair(cliCert, cliKey)
	require.NoError(t, err)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	b := dialRlmmdWith(t, addr, credentials.NewTLS(&tls.Config{RootCAs: roots, ServerName: "127.0.0.1", Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}))
	b.healthy(t)
	b.addAndReadBack(t)

	noCert := dialRlmmdWith(t, addr, credentials.NewTLS(&tls.Config{RootCAs: roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}))
	_, err = noCert.client.CaughtUp(callCtx(t), &pb.CaughtUpRequest{TopicIdPartition: newTP()})
	require.Equal(t, codes.Unavailable, status.Code(err), "a client without a certificate: %v", err)
}
