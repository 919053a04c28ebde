package remotestorage_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/testwait"
)

// The cache's read-your-own-writes promise (API.md: "A write through this
// manager is in its own cache before the call returns") when the caller's
// deadline ends right after the commit, and the cache had not heard of the
// segment yet. A adds; B, whose cache missed the add, finishes the segment;
// B's caller context is cancelled before any catch-up can run. B's update
// returned nil, so B's next read must see the finished segment.
func TestCacheReadsItsOwnWriteAfterTheDeadline(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	a := newCachedManager(t, dsn)
	b := newCachedManager(t, dsn, rs.WithCachePollInterval(0))
	tp := testTP(0)
	require.NoError(t, b.OnPartitionLeadershipChanges(ctx, []rs.TopicIDPartition{tp}, nil))
	waitLoaded(t, b, tp)
	b.DropNotifications(true) // b never hears of a's add
	// The catch-ups that b's own writes ask for end the caller's context:
	// a successful call must not need one.
	var mu sync.Mutex
	var cancel context.CancelFunc = func() {}
	b.BeforeCatchUp(func(rs.TopicIDPartition, bool) {
		mu.Lock()
		defer mu.Unlock()
		cancel()
	})

	succeeded := 0
	for i := range 20 {
		s := segment(tp, int64(i)*100, int64(i)*100+99, map[rs.LeaderEpoch]int64{0: int64(i) * 100})
		require.NoError(t, a.AddRemoteLogSegmentMetadata(ctx, s))

		callCtx, cancelCall := context.WithCancel(ctx)
		mu.Lock()
		cancel = cancelCall
		mu.Unlock()
		err := b.UpdateRemoteLogSegmentMetadata(callCtx, update(s, rs.CopySegmentFinished))
		cancelCall()
		if err != nil {
			// An unrelated catch-up (the listener's first connection asks
			// for one) ended the context before the statement finished:
			// the call failed and promised nothing. Only successes count.
			require.ErrorIs(t, err, context.Canceled)
			require.NoError(t, b.UpdateRemoteLogSegmentMetadata(ctx, update(s, rs.CopySegmentFinished)))
		} else {
			succeeded++
		}

		got, found, err := b.RemoteLogSegmentMetadata(ctx, tp, 0, int64(i)*100+50)
		require.NoError(t, err)
		require.Truef(t, found, "round %d: b's own COPY_SEGMENT_FINISHED is missing from b's cache", i)
		require.Equal(t, s.SegmentID, got.SegmentID)
		require.Equal(t, rs.CopySegmentFinished, got.State)
	}
	require.GreaterOrEqual(t, succeeded, 10, "too few updates succeeded to say anything")
}

// A randomized test of the cache's two promises, over several managers:
// every successful write through a cached manager is visible to that
// manager's next read, and CaughtUp true means every committed write is
// visible. Most writes run with short deadlines (many fail, some with an
// unknown outcome); partitions are stopped and reassigned; notifications are
// dropped at random. RLMM_RYW_STEPS sets the number of steps (default 400),
// RLMM_RYW_SEED the seed.
func TestCacheReadYourWritesRandomized(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	steps := 400
	if s, err := strconv.Atoi(os.Getenv("RLMM_RYW_STEPS")); err == nil {
		steps = s
	}
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("RLMM_RYW_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d (RLMM_RYW_SEED), %d steps", seed, steps)
	rng := rand.New(rand.NewPCG(seed, 0))

	dsn := pgtest.NewDatabase(t)
	pool := newPool(t, dsn, 0, false)
	truth, err := rs.NewPgManager(ctx, pool) // reads the primary
	require.NoError(t, err)
	t.Cleanup(truth.Close)
	pools := []*pgxpool.Pool{pool, newPool(t, dsn, 0, false), newPool(t, dsn, 0, false), newPool(t, dsn, 0, false)}
	cached := []*rs.PgManager{
		newManager(t, pools[1], rs.WithCache()),
		newManager(t, pools[2], rs.WithCache(), rs.WithCachePollInterval(20*time.Millisecond)),
		newManager(t, pools[3], rs.WithCache(), rs.WithCachePollInterval(0)),
	}
	writers := append([]*rs.PgManager{truth}, cached...)
	tps := []rs.TopicIDPartition{testTP(0), testTP(1), testTP(2)}
	consumed := make([]map[int]bool, len(cached))
	for i, m := range cached {
		consumed[i] = map[int]bool{}
		for j, tp := range tps {
			require.NoError(t, m.OnPartitionLeadershipChanges(ctx, []rs.TopicIDPartition{tp}, nil))
			consumed[i][j] = true
		}
	}
	var segments [3][]rs.RemoteLogSegmentMetadata // every add tried, per partition
	next := [3]int64{}
	var succeeded, checked, superseded, unknown, caughtUpChecks int

	// Three writes in four get a deadline of 0.5 to 12.5 ms, shorter than a
	// write on a busy machine; the fourth one so long that it succeeds on
	// any machine, so that there are successes to check.
	deadline := func() (context.Context, context.CancelFunc) {
		if rng.IntN(4) == 0 {
			return context.WithTimeout(ctx, testwait.Timeout(t))
		}
		return context.WithTimeout(ctx, time.Duration(500+rng.IntN(12_000))*time.Microsecond)
	}
	for step := range steps {
		w := rng.IntN(len(writers))
		m := writers[w]
		p := rng.IntN(len(tps))
		tp := tps[p]
		var wrote string
		var check func(list []rs.RemoteLogSegmentMetadata) error
		switch op := rng.IntN(10); {
		case op < 4: // add
			s := segment(tp, next[p], next[p]+99, map[rs.LeaderEpoch]int64{0: next[p]})
			next[p] += 100
			segments[p] = append(segments[p], s)
			c, cancel := deadline()
			err = m.AddRemoteLogSegmentMetadata(c, s)
			cancel()
			wrote = fmt.Sprintf("add %s", s.SegmentID.ID)
			check = func(list []rs.RemoteLogSegmentMetadata) error {
				if !slices.ContainsFunc(list, func(x rs.RemoteLogSegmentMetadata) bool { return x.SegmentID == s.SegmentID }) {
					return errors.New("the added segment is not listed")
				}
				return nil
			}
		case op < 8: // update a segment to a random later state
			if len(segments[p]) == 0 {
				continue
			}
			s := segments[p][rng.IntN(len(segments[p]))]
			state := rs.RemoteLogSegmentState(1 + rng.IntN(3))
			c, cancel := deadline()
			err = m.UpdateRemoteLogSegmentMetadata(c, update(s, state))
			cancel()
			if errors.Is(err, rs.ErrInvalidSegmentTransition) || errors.Is(err, rs.ErrSegmentNotFound) {
				continue
			}
			wrote = fmt.Sprintf("update %s to %s", s.SegmentID.ID, state)
			check = func(list []rs.RemoteLogSegmentMetadata) error {
				i := slices.IndexFunc(list, func(x rs.RemoteLogSegmentMetadata) bool { return x.SegmentID == s.SegmentID })
				switch {
				case state == rs.DeleteSegmentFinished && i >= 0:
					return errors.New("the forgotten segment is still listed")
				case state != rs.DeleteSegmentFinished && i < 0:
					return errors.New("the updated segment is not listed")
				case state != rs.DeleteSegmentFinished && list[i].State != state:
					return fmt.Errorf("the segment is listed in %s", list[i].State)
				}
				return nil
			}
		case op == 8: // stop or reassign a partition on a cached manager
			i := rng.IntN(len(cached))
			if consumed[i][p] {
				require.NoError(t, cached[i].OnStopPartitions(ctx, []rs.TopicIDPartition{tp}))
			} else {
				require.NoError(t, cached[i].OnPartitionLeadershipChanges(ctx, nil, []rs.TopicIDPartition{tp}))
			}
			consumed[i][p] = !consumed[i][p]
			continue
		default: // drop or restore notifications; then check CaughtUp
			i := rng.IntN(len(cached))
			cached[i].DropNotifications(rng.IntN(2) == 0)
			// A write whose deadline ended may still commit: its
			// statement runs on in the background, on its connection,
			// until the server answers the cancel request. Wait for
			// those to end, so that the primary's list below is the
			// one CaughtUp speaks of.
			testwait.Until(t, "every abandoned statement ended", func() bool {
				return !slices.ContainsFunc(pools, func(p *pgxpool.Pool) bool { return p.Stat().AcquiredConns() > 0 })
			})
			// These pools are pgx's own (no ConfigurePool): a statement
			// whose deadline ended loses its connection at once, which the
			// pool then no longer counts, while the server may still run
			// the statement, behind a lock, and commit it later. Wait until
			// the server runs nothing of this database (the caches' polls
			// and catch-ups are brief).
			testwait.Until(t, "no statement still running on the server", func() bool {
				var running int
				require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
					WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle'`).Scan(&running))
				return running == 0
			})
			want, err := truth.ListRemoteLogSegments(ctx, tp)
			require.NoError(t, err)
			ok, err := cached[i].CaughtUp(ctx, tp)
			if errors.Is(err, rs.ErrNotReady) {
				continue
			}
			require.NoError(t, err)
			if ok {
				got, err := cached[i].ListRemoteLogSegments(ctx, tp)
				require.NoError(t, err)
				require.Equalf(t, ids(want), ids(got), "step %d: CaughtUp true on manager %d but its list differs from the primary's", step, i+1)
				caughtUpChecks++
			}
			continue
		}
		if err != nil {
			if rs.OutcomeUnknown(err) {
				unknown++
			}
			continue
		}
		succeeded++
		if w == 0 || !consumed[w-1][p] {
			continue // not cached: the database answered
		}
		list, err := m.ListRemoteLogSegments(ctx, tp)
		if errors.Is(err, rs.ErrNotReady) {
			continue // still loading: no stale answer
		}
		require.NoError(t, err)
		if err := check(list); err != nil {
			// An earlier write whose deadline ended may have committed
			// after this one: then the primary no longer holds this
			// write either, and the cache is right to show the later.
			primary, perr := truth.ListRemoteLogSegments(ctx, tp)
			require.NoError(t, perr)
			require.Errorf(t, check(primary), "step %d: manager %d's own %s is not in its next read: %v", step, w, wrote, err)
			superseded++
			continue
		}
		checked++
	}
	t.Logf("%d writes succeeded, %d read back from the writer's own cache, %d superseded by a late abandoned write, %d outcomes unknown, %d CaughtUp-true lists compared", succeeded, checked, superseded, unknown, caughtUpChecks)
	require.Positive(t, checked)
	require.Positive(t, succeeded)
}
