// Helpers shared by the rlmmd tests and benchmarks.

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/testwait"
	pb "github.com/krabka/remotestorage/proto/remotestorage/v1"
)

type bundle struct {
	d      *daemon
	dsn    string
	client pb.RemoteLogMetadataServiceClient
	conn   *grpc.ClientConn
}

// startDaemon runs rlmmd in process on a fresh database, with edit applied to
// its configuration, and a client connected to it.
func startDaemon(t *testing.T, edit func(*config)) bundle {
	t.Helper()
	return startDaemonTB(t, edit)
}

func startDaemonTB(t testing.TB, edit func(*config)) bundle {
	t.Helper()
	dsn := pgtest.NewDatabase(t)
	cfg, err := parseConfig(nil, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	cfg.listen = "127.0.0.1:0"
	cfg.metricsListen = "127.0.0.1:0"
	cfg.databaseURL, cfg.databaseFrom = dsn, "the test"
	if edit != nil {
		edit(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(t))
	defer cancel()
	d, err := start(ctx, cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(d.Stop)
	b := bundle{d: d, dsn: dsn}
	if cfg.tlsCert == "" {
		b.conn = dial(t, d.Addr(), insecure.NewCredentials())
		b.client = pb.NewRemoteLogMetadataServiceClient(b.conn)
	}
	return b
}

func dial(t testing.TB, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// callCtx returns a context for one call, cancelled at the test timeout.
// Call it in the test goroutine: a bad TESTWAIT_SCALE fails the test.
func callCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(t))
	t.Cleanup(cancel)
	return ctx
}

func newTP() *pb.TopicIdPartition {
	id := uuid.New()
	return &pb.TopicIdPartition{TopicId: id[:], Topic: "orders", Partition: 3}
}

func newSegment(tp *pb.TopicIdPartition, start, end int64, epochs ...*pb.EpochStart) *pb.Segment {
	id := uuid.New()
	return &pb.Segment{
		Id:                  &pb.SegmentId{TopicIdPartition: tp, Id: id[:]},
		StartOffset:         start,
		EndOffset:           end,
		MaxTimestampMs:      1000 + end,
		BrokerId:            1,
		EventTimestampMs:    5,
		SegmentSizeInBytes:  100,
		State:               pb.SegmentState_SEGMENT_STATE_COPY_SEGMENT_STARTED,
		SegmentLeaderEpochs: epochs,
		TxnIndexEmpty:       true,
	}
}

func finish(t *testing.T, c pb.RemoteLogMetadataServiceClient, s *pb.Segment) {
	t.Helper()
	_, err := c.UpdateSegment(callCtx(t), &pb.UpdateSegmentRequest{Update: &pb.SegmentUpdate{
		Id: s.Id, EventTimestampMs: 6, State: pb.SegmentState_SEGMENT_STATE_COPY_SEGMENT_FINISHED, BrokerId: 1,
	}})
	require.NoError(t, err)
	s.State, s.EventTimestampMs = pb.SegmentState_SEGMENT_STATE_COPY_SEGMENT_FINISHED, 6
}

func listAll(t *testing.T, c pb.RemoteLogMetadataServiceClient, req *pb.ListSegmentsRequest) ([]*pb.Segment, int) {
	t.Helper()
	stream, err := c.ListSegments(callCtx(t), req)
	require.NoError(t, err)
	var out []*pb.Segment
	messages := 0
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, messages
		}
		require.NoError(t, err)
		messages++
		out = append(out, resp.Segments...)
	}
}

// errorDetail is the ErrorDetail of a status error.
func errorDetail(t *testing.T, err error) *pb.ErrorDetail {
	t.Helper()
	for _, d := range status.Convert(err).Details() {
		if detail, ok := d.(*pb.ErrorDetail); ok {
			return detail
		}
	}
	t.Fatalf("no ErrorDetail in %v", err)
	return nil
}

// requireStatus checks a call failed with code and an ErrorDetail naming
// sentinel, outcome as given.
func requireStatus(t *testing.T, err error, code codes.Code, sentinel error, outcomeUnknown bool) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, status.Code(err), "%v", err)
	gotSentinel, gotUnknown := errorFromStatus(err)
	require.Equal(t, sentinel, gotSentinel, "%v", err)
	require.Equal(t, outcomeUnknown, gotUnknown, "%v", err)
}

// lockSegment holds a row lock on every segment row of the database until
// the returned release is called: a write of a segment waits for it.
func lockSegment(t *testing.T, dsn string) (release func()) {
	t.Helper()
	return holdLock(t, dsn, "SELECT 1 FROM rlmm_segments FOR UPDATE")
}

// holdLock runs lockSQL in a transaction of its own and holds what it
// locked until release is called (safe to call twice).
func holdLock(t *testing.T, dsn, lockSQL string) (release func()) {
	t.Helper()
	ctx := callCtx(t)
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, lockSQL)
	require.NoError(t, err)
	var once sync.Once
	return func() {
		once.Do(func() {
			_ = tx.Rollback(ctx)
			pool.Close()
		})
	}
}

// waitForLockWait waits until a statement of the database waits on a lock.
func waitForLockWait(t *testing.T, dsn string) { waitForLockWaits(t, dsn, true) }

// waitForLockWaits waits until a statement of the database waits on a lock
// (want true), or until none does (want false).
func waitForLockWaits(t *testing.T, dsn string, want bool) {
	t.Helper()
	ctx := callCtx(t)
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	defer pool.Close()
	testwait.Until(t, fmt.Sprintf("a statement waiting on a lock: %v", want), func() bool {
		var waiting bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock')`).Scan(&waiting))
		return waiting == want
	})
}
