package remotestorage_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/testwait"
)

func TestOutcomeUnknownClassifiesCauses(t *testing.T) {
	t.Parallel()
	ioErr := func(cause error) error { return fmt.Errorf("%w: add segment: %w", rs.ErrIO, cause) }
	for _, c := range []struct {
		name    string
		err     error
		unknown bool
	}{
		{"nil", nil, false},
		{"refused add", fmt.Errorf("%w: segment id was already added", rs.ErrInvalidAdd), false},
		{"refused update", fmt.Errorf("%w: x", rs.ErrInvalidSegmentTransition), false},
		{"not found", fmt.Errorf("%w: x", rs.ErrSegmentNotFound), false},
		{"refused partition delete", fmt.Errorf("%w: x", rs.ErrInvalidPartitionDeleteTransition), false},
		{"not ready", fmt.Errorf("%w: x", rs.ErrNotReady), false},
		{"connection broke mid-reply", ioErr(io.ErrUnexpectedEOF), true},
		{"connection reset", ioErr(&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}), true},
		{"terminated", ioErr(&pgconn.PgError{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: pgerrcode.AdminShutdown}), true},
		{"crash shutdown", ioErr(&pgconn.PgError{Severity: "FATAL", Code: pgerrcode.CrashShutdown}), true},
		{"unique violation", ioErr(&pgconn.PgError{Severity: "ERROR", Code: pgerrcode.UniqueViolation}), false},
		{"serialization failure", ioErr(&pgconn.PgError{Severity: "ERROR", Code: pgerrcode.SerializationFailure}), false},
		{"statement cancelled", ioErr(&pgconn.PgError{Severity: "ERROR", Code: pgerrcode.QueryCanceled}), false},
		{"deadline while waiting for a connection", ioErr(context.DeadlineExceeded), false},
		{"cancelled: maybe mid-statement", ioErr(context.Canceled), true},
		{"something else", errors.New("boom"), true},
	} {
		require.Equal(t, c.unknown, rs.OutcomeUnknown(c.err), c.name)
	}
}

// TestOutcomeUnknownOnRealFailures provokes each kind of failure of a write
// against a real server and checks what OutcomeUnknown says of it.
func TestOutcomeUnknownOnRealFailures(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	tp := testTP(0)
	first := segment(tp, 0, 9, map[rs.LeaderEpoch]int64{0: 0})

	// newManager opens a one-connection pool; failDials makes its dials fail.
	newManager := func(configure bool) (*rs.PgManager, *pgxpool.Pool, *atomic.Bool) {
		cfg, err := pgxpool.ParseConfig(dsn)
		require.NoError(t, err)
		cfg.MaxConns = 1
		failDials := &atomic.Bool{}
		dial := cfg.ConnConfig.DialFunc
		cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if failDials.Load() {
				return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
			}
			return dial(ctx, network, addr)
		}
		if configure {
			rs.ConfigurePool(cfg)
		}
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		m, err := rs.NewPgManager(ctx, pool)
		require.NoError(t, err)
		return m, pool, failDials
	}
	plain, plainPool, plainDials := newManager(false)
	configured, configuredPool, configuredDials := newManager(true)
	require.NoError(t, plain.AddRemoteLogSegmentMetadata(ctx, first))

	// Refusals.
	err := plain.AddRemoteLogSegmentMetadata(ctx, first)
	require.ErrorIs(t, err, rs.ErrInvalidAdd)
	require.False(t, rs.OutcomeUnknown(err))

	// No connection can be made: nothing sent.
	plainDials.Store(true)
	plainPool.Reset()
	err = plain.AddRemoteLogSegmentMetadata(ctx, segment(tp, 10, 19, map[rs.LeaderEpoch]int64{0: 10}))
	var connectErr *pgconn.ConnectError
	require.ErrorAs(t, err, &connectErr)
	require.ErrorIs(t, err, rs.ErrIO)
	require.False(t, rs.OutcomeUnknown(err), "%v", err)
	plainDials.Store(false)

	// The connect backoff refuses the next attempt at once: nothing sent.
	configuredDials.Store(true)
	configuredPool.Reset()
	for range 2 {
		err = configured.AddRemoteLogSegmentMetadata(ctx, segment(tp, 10, 19, map[rs.LeaderEpoch]int64{0: 10}))
		require.ErrorIs(t, err, rs.ErrIO)
		require.False(t, rs.OutcomeUnknown(err), "%v", err)
	}
	require.Contains(t, err.Error(), "not connecting")
	configuredDials.Store(false)
	testwait.Until(t, "the backoff ends", func() bool {
		_, err := configured.CaughtUp(ctx, tp)
		return err == nil
	})
	// The new connection's warm-up runs after its first call (warmup.go)
	// and holds it meanwhile: the calls below must find it idle, or their
	// deadlines pass in the pool's queue with nothing sent.
	testwait.Until(t, "the configured pool's connection is back from its warm-up", func() bool {
		return configuredPool.Stat().IdleConns() == 1
	})

	// The only connection is taken: the deadline passes in the queue.
	held, err := plainPool.Acquire(ctx)
	require.NoError(t, err)
	qctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	err = plain.AddRemoteLogSegmentMetadata(qctx, segment(tp, 10, 19, map[rs.LeaderEpoch]int64{0: 10}))
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.False(t, rs.OutcomeUnknown(err), "%v", err)
	held.Release()

	// Writes sent, then stuck behind a row lock held by another transaction.
	holder, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer holder.Close(context.Background())
	tx, err := holder.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "SELECT 1 FROM rlmm_partitions WHERE topic_id = $1 AND partition = $2 FOR UPDATE", tp.TopicID, tp.Partition)
	require.NoError(t, err)
	stuck := func(m *rs.PgManager, d time.Duration) error {
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return m.UpdateRemoteLogSegmentMetadata(ctx, update(first, rs.CopySegmentFinished))
	}
	// The call returns at its deadline, while the manager asks the server
	// to cancel the statement: it may still commit, so the outcome is
	// unknown.
	err = stuck(configured, 100*time.Millisecond)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.True(t, rs.OutcomeUnknown(err), "%v", err)
	var pgErr *pgconn.PgError

	// A statement terminated while it waits (FATAL 57P01): unknown.
	done := make(chan error, 1)
	go func() { done <- configured.UpdateRemoteLogSegmentMetadata(ctx, update(first, rs.CopySegmentFinished)) }()
	admin, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer admin.Close(context.Background())
	testwait.Until(t, "the statement waiting on the lock is terminated", func() bool {
		select {
		case err = <-done:
			return true
		default:
		}
		_, termErr := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> $1`, holder.PgConn().PID())
		require.NoError(t, termErr)
		return false
	})
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, pgerrcode.AdminShutdown, pgErr.Code)
	require.True(t, rs.OutcomeUnknown(err), "%v", err)

	// The same on a plain pool, whose context watcher would close the
	// socket: the manager does not let the deadline reach it.
	err = stuck(plain, 100*time.Millisecond)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.True(t, rs.OutcomeUnknown(err), "%v", err)
	require.NoError(t, tx.Rollback(ctx))

	// A closed pool: nothing sent.
	plainPool.Close()
	err = plain.AddRemoteLogSegmentMetadata(ctx, segment(tp, 10, 19, map[rs.LeaderEpoch]int64{0: 10}))
	require.ErrorIs(t, err, rs.ErrIO)
	require.False(t, rs.OutcomeUnknown(err), "%v", err)
}

// flakyManager applies the first add it is given, then reports that the
// connection broke before the answer came back, as a crash or a killed
// connection can make a real store do.
type flakyManager struct {
	rs.RemoteLogMetadataManager
	broken bool
}

func (m *flakyManager) AddRemoteLogSegmentMetadata(ctx context.Context, s rs.RemoteLogSegmentMetadata) error {
	if err := m.RemoteLogMetadataManager.AddRemoteLogSegmentMetadata(ctx, s); err != nil || m.broken {
		return err
	}
	m.broken = true
	return fmt.Errorf("%w: add segment %s: %w", rs.ErrIO, s.SegmentID.ID, io.ErrUnexpectedEOF)
}

// addResolved adds s and, when the outcome is unknown, reads back to learn
// whether the add was applied. It retries an add that certainly was not.
func addResolved(ctx context.Context, m rs.RemoteLogMetadataManager, s rs.RemoteLogSegmentMetadata) error {
	for attempt := 1; ; attempt++ {
		err := m.AddRemoteLogSegmentMetadata(ctx, s)
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, rs.ErrIO) || attempt == 3:
			return err // refused, or the store stays down: give up
		case !rs.OutcomeUnknown(err):
			fmt.Println("not applied, retrying:", err)
			continue
		}
		fmt.Println("outcome unknown:", err)
		segments, readErr := m.ListRemoteLogSegments(ctx, s.SegmentID.TopicIDPartition)
		if readErr != nil {
			return readErr // still unknown; try again later
		}
		for _, stored := range segments {
			if stored.SegmentID == s.SegmentID {
				fmt.Println("read back: the add was applied")
				return nil
			}
		}
		fmt.Println("read back: the add was not applied, retrying")
	}
}

// A write whose connection broke after it was sent may have committed:
// OutcomeUnknown says so, and reading back tells which.
func ExampleOutcomeUnknown() {
	ctx := context.Background()
	m := &flakyManager{RemoteLogMetadataManager: rs.NewInMemoryManager()}
	tp := rs.TopicIDPartition{TopicID: uuid.MustParse("6fd630dd-c4fb-4485-aaad-5347f29cf952"), Topic: "orders", Partition: 0}
	seg := rs.RemoteLogSegmentMetadata{
		SegmentID:           rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.MustParse("0c7d9a4e-1b2f-4e8a-9c3d-5f6a7b8c9d0e")},
		EndOffset:           99,
		State:               rs.CopySegmentStarted,
		SegmentLeaderEpochs: map[rs.LeaderEpoch]int64{0: 0},
	}
	if err := addResolved(ctx, m, seg); err != nil {
		fmt.Println("failed:", err)
	}
	// A retried add of an applied segment is refused: its id is taken.
	err := m.AddRemoteLogSegmentMetadata(ctx, seg)
	fmt.Println("retrying anyway:", errors.Is(err, rs.ErrInvalidAdd), rs.OutcomeUnknown(err))
	// Output:
	// outcome unknown: remotestorage: store failure: add segment 0c7d9a4e-1b2f-4e8a-9c3d-5f6a7b8c9d0e: unexpected EOF
	// read back: the add was applied
	// retrying anyway: true false
}
