package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgcluster"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/testwait"
	pb "github.com/krabka/remotestorage/proto/remotestorage/v1"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestServiceRoundTrip drives every method through gRPC against PostgreSQL
// and checks the answers are the library's.
func TestServiceRoundTrip(t *testing.T) {
	t.Parallel()
	b := startDaemon(t, nil)
	c := b.client
	tp := newTP()
	ctx := callCtx(t)

	_, err := c.OnPartitionLeadershipChanges(ctx, &pb.OnPartitionLeadershipChangesRequest{Leaders: []*pb.TopicIdPartition{tp}})
	require.NoError(t, err)

	// 300 segments of 10 offsets, epoch 0 up to offset 1499, epoch 2 from
	// 1500 on; the segment holding 1495-1504 carries both.
	const n = 300
	segs := make([]*pb.Segment, n)
	for i := range n {
		start, end := int64(i*10), int64(i*10+9)
		var epochs []*pb.EpochStart
		switch {
		case end < 1500:
			epochs = []*pb.EpochStart{{Epoch: 0, StartOffset: start}}
		case start >= 1500:
			epochs = []*pb.EpochStart{{Epoch: 2, StartOffset: start}}
		}
		segs[i] = newSegment(tp, start, end, epochs...)
		if i == 149 {
			segs[i] = newSegment(tp, 1490, 1499, &pb.EpochStart{Epoch: 0, StartOffset: 1490})
		}
		if i == 2 {
			segs[i].CustomMetadata = []byte("custom")
			segs[i].TxnIndexEmpty = false
		}
		_, err := c.AddSegment(ctx, &pb.AddSegmentRequest{Segment: segs[i]})
		require.NoError(t, err)
		finish(t, c, segs[i])
	}
	mixed := newSegment(tp, 3000, 3009, &pb.EpochStart{Epoch: 2, StartOffset: 3000}, &pb.EpochStart{Epoch: 3, StartOffset: 3005})
	_, err = c.AddSegment(ctx, &pb.AddSegmentRequest{Segment: mixed})
	require.NoError(t, err)
	finish(t, c, mixed)

	got, err := c.GetSegment(ctx, &pb.GetSegmentRequest{TopicIdPartition: tp, Epoch: 0, Offset: 25})
	require.NoError(t, err)
	require.True(t, proto.Equal(segs[2], got.Segment), "GetSegment(0, 25) = %v, want %v", got.Segment, segs[2])
	require.Equal(t, []byte("custom"), got.Segment.CustomMetadata)
	got, err = c.GetSegment(ctx, &pb.GetSegmentRequest{TopicIdPartition: tp, Epoch: 1, Offset: 25})
	require.NoError(t, err)
	require.Nil(t, got.Segment, "no segment carries epoch 1")

	hi, err := c.HighestOffsetForEpoch(ctx, &pb.HighestOffsetForEpochRequest{TopicIdPartition: tp, Epoch: 2})
	require.NoError(t, err)
	require.True(t, hi.Found)
	require.Equal(t, int64(3009), hi.Offset)
	// Kafka's meaning: epoch 2 ends at 3004 inside the mixed segment.
	end, err := c.EpochEndOffset(ctx, &pb.EpochEndOffsetRequest{TopicIdPartition: tp, Epoch: 2})
	require.NoError(t, err)
	require.True(t, end.Found)
	require.Equal(t, int64(3004), end.Offset)
	end, err = c.EpochEndOffset(ctx, &pb.EpochEndOffsetRequest{TopicIdPartition: tp, Epoch: 7})
	require.NoError(t, err)
	require.False(t, end.Found)

	all, messages := listAll(t, c, &pb.ListSegmentsRequest{TopicIdPartition: tp})
	require.Len(t, all, n+1)
	require.Equal(t, 2, messages, "301 segments come in batches of %d", listBatch)
	for i, s := range all[:n] {
		require.True(t, proto.Equal(segs[i], s), "list[%d]", i)
	}
	epoch := int32(0)
	byEpoch, _ := listAll(t, c, &pb.ListSegmentsRequest{TopicIdPartition: tp, Epoch: &epoch})
	require.Len(t, byEpoch, 150)

	size, err := c.RemoteLogSize(ctx, &pb.RemoteLogSizeRequest{TopicIdPartition: tp, Epoch: 0})
	require.NoError(t, err)
	require.Equal(t, int64(150*100), size.SizeBytes)

	next, err := c.NextSegmentWithTxnIndex(ctx, &pb.NextSegmentWithTxnIndexRequest{TopicIdPartition: tp, Epoch: 0, Offset: 0})
	require.NoError(t, err)
	require.True(t, proto.Equal(segs[2], next.Segment))

	first, err := c.FirstSegmentForTimestamp(ctx, &pb.FirstSegmentForTimestampRequest{TopicIdPartition: tp, Epoch: 2, TimestampMs: 1000 + 1600, StartingOffset: 0})
	require.NoError(t, err)
	require.Equal(t, int64(1600), first.Segment.GetStartOffset())

	up, err := c.CaughtUp(ctx, &pb.CaughtUpRequest{TopicIdPartition: tp})
	require.NoError(t, err)
	require.True(t, up.CaughtUp)
	_, err = c.OnStopPartitions(ctx, &pb.OnStopPartitionsRequest{Partitions: []*pb.TopicIdPartition{tp}})
	require.NoError(t, err)
	up, err = c.CaughtUp(ctx, &pb.CaughtUpRequest{TopicIdPartition: tp})
	require.NoError(t, err)
	require.False(t, up.CaughtUp, "a partition the service no longer consumes is not caught up")

	_, err = c.PutPartitionDelete(ctx, &pb.PutPartitionDeleteRequest{PartitionDelete: &pb.PartitionDelete{
		TopicIdPartition: tp, State: pb.PartitionDeleteState_PARTITION_DELETE_STATE_DELETE_PARTITION_MARKED, BrokerId: 1,
	}})
	require.NoError(t, err)
}

// TestErrorsKeepTheSentinel: each refusal of the library reaches the client
// as its status code, with the sentinel and OutcomeUnknown in the details.
func TestErrorsKeepTheSentinel(t *testing.T) {
	t.Parallel()
	b := startDaemon(t, nil)
	c := b.client
	ctx := callCtx(t)
	tp := newTP()
	s := newSegment(tp, 0, 9, &pb.EpochStart{Epoch: 0, StartOffset: 0})
	_, err := c.AddSegment(ctx, &pb.AddSegmentRequest{Segment: s})
	require.NoError(t, err)

	_, err = c.AddSegment(ctx, &pb.AddSegmentRequest{Segment: s})
	requireStatus(t, err, codes.InvalidArgument, rs.ErrInvalidAdd, false)
	require.Contains(t, status.Convert(err).Message(), "remotestorage: invalid add")

	unknown := proto.Clone(s).(*pb.Segment)
	id := uuid.New()
	unknown.Id.Id = id[:]
	_, err = c.UpdateSegment(ctx, &pb.UpdateSegmentRequest{Update: &pb.SegmentUpdate{Id: unknown.Id, State: pb.SegmentState_SEGMENT_STATE_COPY_SEGMENT_FINISHED}})
	requireStatus(t, err, codes.NotFound, rs.ErrSegmentNotFound, false)

	// A refused transition names the state it found, when it read one.
	_, err = c.UpdateSegment(ctx, &pb.UpdateSegmentRequest{Update: &pb.SegmentUpdate{Id: s.Id, State: pb.SegmentState_SEGMENT_STATE_DELETE_SEGMENT_FINISHED}})
	requireStatus(t, err, codes.FailedPrecondition, rs.ErrInvalidSegmentTransition, false)
	require.Equal(t, pb.SegmentState_SEGMENT_STATE_COPY_SEGMENT_STARTED.Enum(), errorDetail(t, err).FoundSegmentState)
	_, err = c.UpdateSegment(ctx, &pb.UpdateSegmentRequest{Update: &pb.SegmentUpdate{Id: s.Id}})
	requireStatus(t, err, codes.FailedPrecondition, rs.ErrInvalidSegmentTransition, false)
	require.Nil(t, errorDetail(t, err).FoundSegmentState, "refused before the segment was read")

	_, err = c.PutPartitionDelete(ctx, &pb.PutPartitionDeleteRequest{PartitionDelete: &pb.PartitionDelete{
		TopicIdPartition: tp, State: pb.PartitionDeleteState_PARTITION_DELETE_STATE_DELETE_PARTITION_FINISHED,
	}})
	requireStatus(t, err, codes.FailedPrecondition, rs.ErrInvalidPartitionDeleteTransition, false)
	require.Equal(t, pb.PartitionDeleteState_PARTITION_DELETE_STATE_UNSPECIFIED.Enum(), errorDetail(t, err).FoundPartitionDeleteState, "no record")
	_, err = c.PutPartitionDelete(ctx, &pb.PutPartitionDeleteRequest{PartitionDelete: &pb.PartitionDelete{
		TopicIdPartition: tp, State: pb.PartitionDeleteState_PARTITION_DELETE_STATE_DELETE_PARTITION_MARKED,
	}})
	require.NoError(t, err)
	_, err = c.PutPartitionDelete(ctx, &pb.PutPartitionDeleteRequest{PartitionDelete: &pb.PartitionDelete{
		TopicIdPartition: tp, State: pb.PartitionDeleteState_PARTITION_DELETE_STATE_DELETE_PARTITION_FINISHED,
	}})
	requireStatus(t, err, codes.FailedPrecondition, rs.ErrInvalidPartitionDeleteTransition, false)
	require.Equal(t, pb.PartitionDeleteState_PARTITION_DELETE_STATE_DELETE_PARTITION_MARKED.Enum(), errorDetail(t, err).FoundPartitionDeleteState)
	tp = newTP() // the rest adds to a partition without a delete record

	// Malformed requests are refused before the library: an add says
	// INVALID_ADD (nothing stored), other calls name no sentinel.
	bad := proto.Clone(s).(*pb.Segment)
	bad.Id.Id = []byte{1, 2, 3}
	_, err = c.AddSegment(ctx, &pb.AddSegmentRequest{Segment: bad})
	requireStatus(t, err, codes.InvalidArgument, rs.ErrInvalidAdd, false)
	require.Contains(t, status.Convert(err).Message(), "want 16 bytes, got 3")
	_, err = c.GetSegment(ctx, &pb.GetSegmentRequest{})
	requireStatus(t, err, codes.InvalidArgument, nil, false)
	twice := newSegment(tp, 10, 19, &pb.EpochStart{Epoch: 0, StartOffset: 10}, &pb.EpochStart{Epoch: 0, StartOffset: 12})
	_, err = c.AddSegment(ctx, &pb.AddSegmentRequest{Segment: twice})
	requireStatus(t, err, codes.InvalidArgument, rs.ErrInvalidAdd, false)
}

// TestDeadline: a write whose deadline ends while PostgreSQL runs it fails
// with DEADLINE_EXCEEDED. The server's status says ERROR_KIND_IO, and
// outcome_unknown as the library's OutcomeUnknown says: true, because the
// library answers at the deadline, before the server has acknowledged the
// cancel (statement.go). The cancel then rolls the statement back: the
// segment is unchanged.
func TestDeadline(t *testing.T) {
	t.Parallel()
	b := startDaemon(t, nil)
	c := b.client
	tp := newTP()
	s := newSegment(tp, 0, 9, &pb.EpochStart{Epoch: 0, StartOffset: 0})
	_, err := c.AddSegment(callCtx(t), &pb.AddSegmentRequest{Segment: s})
	require.NoError(t, err)
	release := lockSegment(t, b.dsn)
	update := &pb.UpdateSegmentRequest{Update: &pb.SegmentUpdate{Id: s.Id, State: pb.SegmentState_SEGMENT_STATE_COPY_SEGMENT_FINISHED}}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = c.UpdateSegment(ctx, update)
	require.Equal(t, codes.DeadlineExceeded, status.Code(err), "%v", err)
	// The client stops waiting at its deadline, before the server's answer
	// arrives: ask the service in process for the status it sends.
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = b.d.svc.UpdateSegment(ctx, update)
	requireStatus(t, err, codes.DeadlineExceeded, rs.ErrIO, true)
	// The library cancels the statement in the background: release the
	// lock once no statement waits on it any more.
	waitForLockWaits(t, b.dsn, false)
	release()
	list, _ := listAll(t, c, &pb.ListSegmentsRequest{TopicIdPartition: tp})
	require.Len(t, list, 1)
	require.Equal(t, pb.SegmentState_SEGMENT_STATE_COPY_SEGMENT_STARTED, list[0].State)
}

// TestToStatusOutcomeUnknown: a store failure that leaves the write's
// outcome open says so in the details.
func TestToStatusOutcomeUnknown(t *testing.T) {
	t.Parallel()
	unknown := errors.Join(rs.ErrIO, io.ErrUnexpectedEOF)
	require.True(t, rs.OutcomeUnknown(unknown))
	requireStatus(t, toStatus(unknown), codes.Unavailable, rs.ErrIO, true)
	// An error the library does not name is unknown, as OutcomeUnknown says.
	requireStatus(t, toStatus(errors.New("surprise")), codes.Unknown, nil, true)
	require.NoError(t, toStatus(nil))
}

// TestGracefulStop: a stop lets the call in flight finish and refuses new
// ones, and the health check says NOT_SERVING.
func TestGracefulStop(t *testing.T) {
	t.Parallel()
	b := startDaemon(t, nil)
	c := b.client
	health := healthpb.NewHealthClient(b.conn)
	resp, err := health.Check(callCtx(t), &healthpb.HealthCheckRequest{Service: serviceName})
	require.NoError(t, err)
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.Status)

	tp := newTP()
	s := newSegment(tp, 0, 9, &pb.EpochStart{Epoch: 0, StartOffset: 0})
	_, err = c.AddSegment(callCtx(t), &pb.AddSegmentRequest{Segment: s})
	require.NoError(t, err)
	release := lockSegment(t, b.dsn)
	inFlight := make(chan error, 1)
	ctx := callCtx(t)
	go func() {
		_, err := c.UpdateSegment(ctx, &pb.UpdateSegmentRequest{Update: &pb.SegmentUpdate{Id: s.Id, State: pb.SegmentState_SEGMENT_STATE_COPY_SEGMENT_FINISHED}})
		inFlight <- err
	}()
	waitForLockWait(t, b.dsn)
	stopped := make(chan struct{})
	go func() {
		b.d.Stop()
		close(stopped)
	}()
	// New calls are refused once the stop began (a new connection finds
	// no listener).
	other := pb.NewRemoteLogMetadataServiceClient(dial(t, b.d.Addr(), insecure.NewCredentials()))
	testwait.Until(t, "new calls refused after the stop began", func() bool {
		_, err := other.CaughtUp(ctx, &pb.CaughtUpRequest{TopicIdPartition: tp})
		if status.Code(err) == codes.Unavailable {
			return true
		}
		require.NoError(t, err, "before the stop took hold")
		return false
	})
	select {
	case <-stopped:
		t.Fatal("the stop finished before the call in flight")
	default:
	}
	release()
	require.NoError(t, <-inFlight, "the call in flight finishes")
	<-stopped
	pool, err := pgxpool.New(callCtx(t), b.dsn)
	require.NoError(t, err)
	defer pool.Close()
	var state int16
	require.NoError(t, pool.QueryRow(callCtx(t), "SELECT state FROM rlmm_segments").Scan(&state))
	require.Equal(t, int16(rs.CopySegmentFinished), state)
}

// TestMetrics: the endpoint serves the gRPC call counts and the library's
// operation metrics.
func TestMetrics(t *testing.T) {
	t.Parallel()
	b := startDaemon(t, nil)
	_, err := b.client.CaughtUp(callCtx(t), &pb.CaughtUpRequest{TopicIdPartition: newTP()})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(callCtx(t), http.MethodGet, "http://"+b.d.MetricsAddr()+"/metrics", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Contains(t, string(body), `rlmmd_grpc_calls_total{code="OK",method="CaughtUp"} 1`)
	require.Contains(t, string(body), `rlmm_operation_duration_seconds_count{operation="CaughtUp"} 1`)
	require.Contains(t, string(body), `rlmm_caught_up_answers_total{answer="false"} 1`, "a partition rlmmd does not consume")
	require.Contains(t, string(body), "\nrlmmd_serving 1\n")
	require.Contains(t, string(body), `rlmm_stuck_segments{state="COPY_SEGMENT_STARTED"} 0`)
	require.Contains(t, string(body), `rlmm_purge_last_success_timestamp_seconds `)
}

// TestListenRefusesNonLoopbackWithoutTLS: plaintext is for loopback and
// unix sockets only.
func TestListenRefusesNonLoopbackWithoutTLS(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"0.0.0.0:9190", ":9190", "192.0.2.1:9190", "[::]:9190", "example.com:9190"} {
		_, _, err := listenAddress(config{listen: addr})
		require.ErrorContains(t, err, "is not a loopback address", addr)
		_, _, err = listenAddress(config{listen: addr, tlsCert: "c", tlsKey: "k"})
		require.NoError(t, err, addr)
	}
	for _, addr := range []string{"127.0.0.1:9190", "[::1]:9190", "localhost:9190", "127.0.0.2:1"} {
		_, _, err := listenAddress(config{listen: addr})
		require.NoError(t, err, addr)
	}
	network, path, err := listenAddress(config{listen: "unix:/run/rlmmd.sock"})
	require.NoError(t, err)
	require.Equal(t, "unix", network)
	require.Equal(t, "/run/rlmmd.sock", path)
	_, _, err = listenAddress(config{listen: "unix:"})
	require.ErrorContains(t, err, "needs a path")

	// start refuses before it connects to anything.
	_, err = start(callCtx(t), config{listen: "0.0.0.0:0", databaseURL: "postgres://nowhere.invalid/x"}, slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "is not a loopback address")
}

// TestUnixSocket serves on a unix socket.
func TestUnixSocket(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "rlmmd.sock")
	b := startDaemon(t, func(c *config) { c.listen = "unix:" + sock })
	c := pb.NewRemoteLogMetadataServiceClient(dial(t, "unix:"+sock, insecure.NewCredentials()))
	_, err := c.CaughtUp(callCtx(t), &pb.CaughtUpRequest{TopicIdPartition: newTP()})
	require.NoError(t, err)
	require.Equal(t, sock, b.d.Addr())
}

// TestMutualTLS: with --tls-client-ca a client without a certificate of
// that CA is refused, and one with it is served.
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, err := pgcluster.NewCA("rlmmd test CA")
	require.NoError(t, err)
	srvCert, srvKey, err := ca.Issue("localhost", "127.0.0.1")
	require.NoError(t, err)
	cliCert, cliKey, err := ca.IssueClient("broker-1")
	require.NoError(t, err)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o600))
		return p
	}
	b := startDaemon(t, func(c *config) {
		c.listen = "127.0.0.1:0"
		c.tlsCert, c.tlsKey = write("srv.crt", srvCert), write("srv.key", srvKey)
		c.tlsClientCA = write("ca.crt", ca.CertPEM())
	})
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(ca.CertPEM()))

	noCert := pb.NewRemoteLogMetadataServiceClient(dial(t, b.d.Addr(), credentials.NewTLS(&tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})))
	_, err = noCert.CaughtUp(callCtx(t), &pb.CaughtUpRequest{TopicIdPartition: newTP()})
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)

	pair, err := tls.X509KeyPair(cliCert, cliKey)
	require.NoError(t, err)
	withCert := pb.NewRemoteLogMetadataServiceClient(dial(t, b.d.Addr(), credentials.NewTLS(&tls.Config{RootCAs: roots, ServerName: "127.0.0.1", Certificates: []tls.Certificate{pair}})))
	_, err = withCert.CaughtUp(callCtx(t), &pb.CaughtUpRequest{TopicIdPartition: newTP()})
	require.NoError(t, err)
}

// TestConfig: flags, then RLMMD_* variables; the DSN as rlmmctl takes it.
func TestConfig(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"RLMMD_LISTEN":           "unix:/run/x.sock",
		"RLMMD_SHUTDOWN_TIMEOUT": "5s",
		"DATABASE_URL":           "postgres://from-env/db",
	}
	getenv := func(k string) string { return env[k] }
	cfg, err := parseConfig([]string{"--metrics-listen", ""}, getenv, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "unix:/run/x.sock", cfg.listen)
	require.Equal(t, 5*time.Second, cfg.shutdownTimeout)
	require.Equal(t, "", cfg.metricsListen)
	require.Equal(t, "postgres://from-env/db", cfg.databaseURL)
	require.Equal(t, "DATABASE_URL", cfg.databaseFrom)

	cfg, err = parseConfig([]string{"--listen", "127.0.0.1:1", "--database-url", "postgres://flag/db"}, getenv, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:1", cfg.listen, "a flag wins over the environment")
	require.Equal(t, "--database-url", cfg.databaseFrom)

	cfg, err = parseConfig(nil, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "", cfg.databaseURL)
	require.Contains(t, cfg.databaseFrom, "PG*")

	env["RLMMD_SHUTDOWN_TIMEOUT"] = "soon"
	_, err = parseConfig(nil, getenv, io.Discard)
	require.ErrorContains(t, err, `RLMMD_SHUTDOWN_TIMEOUT="soon"`)
	_, err = parseConfig([]string{"--tls-cert", "c"}, func(string) string { return "" }, io.Discard)
	require.ErrorContains(t, err, "go together")
	_, err = parseConfig([]string{"--tls-client-ca", "ca"}, func(string) string { return "" }, io.Discard)
	require.ErrorContains(t, err, "mutual TLS is TLS first")
	_, err = parseConfig([]string{"extra"}, func(string) string { return "" }, io.Discard)
	require.ErrorContains(t, err, "takes no arguments")
	var usage strings.Builder
	_, err = parseConfig([]string{"--help"}, func(string) string { return "" }, &usage)
	require.Error(t, err)
	require.Contains(t, usage.String(), "RLMMD_LISTEN")
}
