package remotestorage_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/rstest"
)

// brokersFunc returns n managers, each over its own pool, sharing one
// database, and a pool for reading the tables. The races run with managers
// straight on the server (brokers) and through PgBouncer (pgmanager_pgbouncer_test.go).
type brokersFunc func(t *testing.T, n int) ([]*rs.PgManager, *pgxpool.Pool)

// brokers is a brokersFunc on a new database of the test server.
func brokers(t *testing.T, n int) ([]*rs.PgManager, *pgxpool.Pool) {
	t.Helper()
	return brokersOn(t, pgtest.NewDatabase(t), n)
}

// Eight brokers add segments to one partition at once: every add lands, in
// an order every list agrees on, and each wrote exactly one row.
func TestBrokersConcurrentAdds(t *testing.T) {
	t.Parallel()
	testBrokersConcurrentAdds(t, brokers)
}

func testBrokersConcurrentAdds(t *testing.T, brokers brokersFunc) {
	ctx := t.Context()
	managers, admin := brokers(t, 8)
	writes := rstest.CountWrites(t, admin)
	tp := testTP(0)
	const perBroker = 40
	var wg sync.WaitGroup
	errs := make(chan error, len(managers)*perBroker)
	for b, m := range managers {
		wg.Go(func() {
			for i := range perBroker {
				// Every broker writes the same offsets, so starts tie often.
				start := int64(i * 10)
				errs <- m.AddRemoteLogSegmentMetadata(ctx, segment(tp, start, start+9+int64(b), map[rs.LeaderEpoch]int64{0: start}))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	list, err := managers[0].ListRemoteLogSegments(ctx, tp)
	require.NoError(t, err)
	require.Len(t, list, len(managers)*perBroker)
	for i := 1; i < len(list); i++ {
		require.LessOrEqual(t, list[i-1].StartOffset, list[i].StartOffset)
	}
	for _, m := range managers[1:] {
		other, err := m.ListRemoteLogSegments(ctx, tp)
		require.NoError(t, err)
		require.Equal(t, list, other)
	}
	require.EqualValues(t, len(managers)*perBroker, writes(tp))
}

// Brokers race transitions on one segment. Every DELETE_SEGMENT_STARTED is
// valid whenever it lands; a COPY_SEGMENT_FINISHED is valid only before the
// first of them. The rows written count exactly the successes, so no
// refused update wrote anything and no accepted one was lost.
func TestBrokersRacingTransitions(t *testing.T) {
	t.Parallel()
	testBrokersRacingTransitions(t, brokers)
}

func testBrokersRacingTransitions(t *testing.T, brokers brokersFunc) {
	ctx := t.Context()
	managers, admin := brokers(t, 8)
	writes := rstest.CountWrites(t, admin)
	for round := range 20 {
		tp := testTP(int32(round))
		s := segment(tp, 0, 99, map[rs.LeaderEpoch]int64{0: 0})
		require.NoError(t, managers[0].AddRemoteLogSegmentMetadata(ctx, s))
		var wg sync.WaitGroup
		results := make([]error, len(managers))
		for b, m := range managers {
			wg.Go(func() {
				to := rs.CopySegmentFinished
				if b%2 == 1 {
					to = rs.DeleteSegmentStarted
				}
				results[b] = m.UpdateRemoteLogSegmentMetadata(ctx, update(s, to))
			})
		}
		wg.Wait()
		successes := 0
		for b, err := range results {
			if err == nil {
				successes++
				continue
			}
			require.Zero(t, b%2, "DELETE_SEGMENT_STARTED is valid from every state it can meet: %v", err)
			require.ErrorIs(t, err, rs.ErrInvalidSegmentTransition)
		}
		require.EqualValues(t, 1+successes, writes(tp))
		list, err := managers[0].ListRemoteLogSegments(ctx, tp)
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Equal(t, rs.DeleteSegmentStarted, list[0].State)

		// Now exactly one state is reachable from DELETE_SEGMENT_STARTED
		// besides itself; every broker asks for it at once and all succeed
		// (self-transitions are idempotent retries), leaving it forgotten.
		for b, m := range managers {
			wg.Go(func() { results[b] = m.UpdateRemoteLogSegmentMetadata(ctx, update(s, rs.DeleteSegmentFinished)) })
		}
		wg.Wait()
		for _, err := range results {
			require.NoError(t, err)
		}
		list, err = managers[0].ListRemoteLogSegments(ctx, tp)
		require.NoError(t, err)
		require.Empty(t, list)
	}
}

// A partition delete races adds: the adds that succeeded are all there, the
// ones refused are not, and every add that started after the mark returned
// was refused.
func TestBrokersPartitionDeleteRacesAdds(t *testing.T) {
	t.Parallel()
	testBrokersPartitionDeleteRacesAdds(t, brokers)
}

func testBrokersPartitionDeleteRacesAdds(t *testing.T, brokers brokersFunc) {
	ctx := t.Context()
	managers, admin := brokers(t, 8)
	writes := rstest.CountWrites(t, admin)
	tp := testTP(0)
	var (
		wg         sync.WaitGroup
		mu         sync.Mutex
		added      = map[[16]byte]bool{}
		refused    = map[[16]byte]bool{}
		problems   []error
		markDone   = make(chan struct{})
		someLanded = make(chan struct{})
		landed     sync.Once
	)
	for _, m := range managers[1:] {
		wg.Go(func() {
			for i := range 60 {
				s := segment(tp, int64(i), int64(i), map[rs.LeaderEpoch]int64{0: int64(i)})
				afterMark := false
				select {
				case <-markDone:
					afterMark = true
				default:
				}
				err := m.AddRemoteLogSegmentMetadata(ctx, s)
				mu.Lock()
				switch {
				case err == nil && afterMark:
					problems = append(problems, errors.New("an add that started after the mark returned succeeded"))
				case err == nil:
					added[s.SegmentID.ID] = true
					if len(added) == 20 {
						landed.Do(func() { close(someLanded) })
					}
				case errors.Is(err, rs.ErrInvalidAdd):
					refused[s.SegmentID.ID] = true
				default:
					problems = append(problems, err)
				}
				mu.Unlock()
			}
		})
	}
	<-someLanded // mark while the adds are in full flow
	markErr := managers[0].PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{TopicIDPartition: tp, State: rs.DeletePartitionMarked})
	close(markDone)
	wg.Wait()
	require.NoError(t, markErr)
	require.Empty(t, problems)
	list, err := managers[0].ListRemoteLogSegments(ctx, tp)
	require.NoError(t, err)
	require.Len(t, list, len(added))
	for _, s := range list {
		require.True(t, added[s.SegmentID.ID])
	}
	require.EqualValues(t, len(added)+1, writes(tp))
	t.Logf("%d adds landed before the mark, %d were refused", len(added), len(refused))
}
