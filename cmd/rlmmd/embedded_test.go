package main

// The flags a parent process uses to run rlmmd as its child (the Kafka
// plugin's embedded mode, docs/KAFKA.md): --migrate, --stop-on-stdin-eof,
// --memory-limit, --release-binary-pages (pages_test.go) and --version.

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/credentials/insecure"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/testwait"
	pb "github.com/krabka/remotestorage/proto/remotestorage/v1"
)

// TestMigrateFlag: on an empty database rlmmd refuses to serve without
// --migrate, naming the schema's state, and serves with it; a second
// rlmmd with --migrate on the migrated database serves too.
func TestMigrateFlag(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewEmptyDatabase(t)
	cfg, err := parseConfig([]string{"--listen", "127.0.0.1:0", "--metrics-listen", "", "--database-url", dsn}, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(t))
	defer cancel()

	_, err = start(ctx, cfg, slog.New(slog.DiscardHandler))
	require.ErrorIs(t, err, rs.ErrSchemaMismatch)
	require.ErrorContains(t, err, "no remotestorage schema")

	cfg.migrate = true
	for range 2 {
		d, err := start(ctx, cfg, slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		c := pb.NewRemoteLogMetadataServiceClient(dial(t, d.Addr(), insecure.NewCredentials()))
		_, err = c.CaughtUp(ctx, &pb.CaughtUpRequest{TopicIdPartition: newTP()})
		require.NoError(t, err)
		d.Stop()
	}
}

// TestStopAtEOF: the context ends when the pipe's writer closes it, as the
// kernel does when the parent dies, and not before.
func TestStopAtEOF(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer func() { _ = r.Close() }()
	ctx := stopAtEOF(context.Background(), r, slog.New(slog.DiscardHandler))
	_, err = w.Write([]byte("anything the parent writes is read and ignored\n"))
	require.NoError(t, err)
	select {
	case <-ctx.Done():
		t.Fatal("stopped while the pipe is open")
	case <-time.After(100 * time.Millisecond):
	}
	require.NoError(t, w.Close())
	select {
	case <-ctx.Done():
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("not stopped after the pipe closed")
	}
}

func TestEmbeddingFlags(t *testing.T) {
	t.Parallel()
	none := func(string) string { return "" }
	cfg, err := parseConfig([]string{"--migrate", "--stop-on-stdin-eof", "--memory-limit", "48MiB", "--release-binary-pages"}, none, io.Discard)
	require.NoError(t, err)
	require.True(t, cfg.migrate)
	require.True(t, cfg.stopOnStdinEOF)
	require.True(t, cfg.releasePages)
	require.Equal(t, int64(48<<20), cfg.memoryLimit)

	cfg, err = parseConfig(nil, func(k string) string { return map[string]string{"RLMMD_MEMORY_LIMIT": "1GiB"}[k] }, io.Discard)
	require.NoError(t, err)
	require.Equal(t, int64(1<<30), cfg.memoryLimit)

	for _, bad := range []string{"lots", "-1MiB", "0", "1TiB", "99999999999GiB"} {
		_, err := parseConfig([]string{"--memory-limit", bad}, none, io.Discard)
		require.ErrorContains(t, err, "--memory-limit", bad)
	}
	for in, want := range map[string]int64{"4096": 4096, "10B": 10, "3KiB": 3 << 10, "2GiB": 2 << 30} {
		got, err := parseSize(in)
		require.NoError(t, err)
		require.Equal(t, want, got, in)
	}

	cfg, err = parseConfig([]string{"--version"}, none, io.Discard)
	require.NoError(t, err)
	require.True(t, cfg.showVersion)
}
