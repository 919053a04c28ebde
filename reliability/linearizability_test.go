package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgcluster"
	"github.com/krabka/remotestorage/internal/testwait"
)

const linBrokers = 8

// TestLinearizableHealthy: eight brokers, each with its own pool and
// manager, on a healthy database.
func TestLinearizableHealthy(t *testing.T) {
	dsn := sharedDatabase(t)
	bs := brokers(t, dsn, linBrokers, brokerConfig{maxConns: 2})
	h := newLinHarness(t, 3)
	if soak() {
		h.maxOps = 400
	}
	h.run(managersOf(bs), nil)
	h.requireLinearizable()
}

// TestLinearizableUnderFaults: the same while the database's connections
// are killed (pg_terminate_backend, five times 200 ms apart), the server
// is stopped and started (pg_ctl stop -m fast), then crashes and recovers
// (pg_ctl stop -m immediate).
func TestLinearizableUnderFaults(t *testing.T) {
	c, dsn := ownCluster(t, pgcluster.Options{})
	bs := brokers(t, dsn, linBrokers, brokerConfig{maxConns: 2})
	h := newLinHarness(t, 3)
	h.maxOps = 1000 // until the faults are over
	h.pace = 15 * time.Millisecond
	if soak() {
		h.pace = 5 * time.Millisecond
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { h.run(managersOf(bs), stop) })

	ctx, cancel := context.WithTimeout(context.Background(), 2*testwait.Timeout(t))
	defer cancel()
	pause := func(d time.Duration) { time.Sleep(d) } // the fault script's own timing
	pause(300 * time.Millisecond)
	admin, err := pgx.Connect(ctx, c.URL("postgres"))
	require.NoError(t, err)
	for range 5 {
		pause(200 * time.Millisecond)
		_, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = 'rlmm' AND backend_type = 'client backend'`)
		require.NoError(t, err)
	}
	require.NoError(t, admin.Close(ctx))
	pause(300 * time.Millisecond)
	require.NoError(t, c.Shutdown(ctx, pgcluster.Fast))
	pause(300 * time.Millisecond)
	require.NoError(t, c.Startup(ctx))
	pause(500 * time.Millisecond)
	require.NoError(t, c.Shutdown(ctx, pgcluster.Immediate))
	require.NoError(t, c.Startup(ctx))
	pause(1500 * time.Millisecond)
	close(stop)
	wg.Wait()
	require.NotEmpty(t, h.failed, "the faults failed no write")
	h.requireLinearizable()
}

// TestLinearizabilityCheckerCatchesBugs runs the harness against deliberately
// wrong managers: the check must fail, and write its visualisation.
func TestLinearizabilityCheckerCatchesBugs(t *testing.T) {
	t.Parallel()
	for name, wrap := range map[string]func(m *rs.InMemoryManager) rs.RemoteLogMetadataManager{
		// Two brokers may both win the add of one segment id.
		"both-win-add": func(m *rs.InMemoryManager) rs.RemoteLogMetadataManager { return bothWinAdd{m} },
		// Lists answer from a copy refreshed every fourth call.
		"stale-list": func(m *rs.InMemoryManager) rs.RemoteLogMetadataManager {
			return &staleList{InMemoryManager: m, cache: map[rs.TopicIDPartition][]rs.RemoteLogSegmentMetadata{}}
		},
		// An update that follows another of the same segment is decided on
		// the state before that one, and reports the state after it.
		"racing-refusal": func(m *rs.InMemoryManager) rs.RemoteLogMetadataManager {
			return &racingRefusal{InMemoryManager: m, state: map[uuid.UUID]rs.RemoteLogSegmentState{}, before: map[uuid.UUID]rs.RemoteLogSegmentState{}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			shared := wrap(rs.NewInMemoryManager())
			managers := make([]rs.RemoteLogMetadataManager, linBrokers)
			for i := range managers {
				managers[i] = shared
			}
			h := newLinHarness(t, 2)
			h.deletes = false
			if name == "racing-refusal" {
				// The racing workload: the random one seldom updates a
				// segment twice in a row.
				h.input = newLinRace(linBrokers, 4, 2, false).input
				h.maxOps = 100
			}
			h.run(managers, nil)
			require.Empty(t, h.problems)
			res, path := h.check(t.TempDir())
			require.Equal(t, porcupine.Illegal, res)
			info, err := os.Stat(path)
			require.NoError(t, err)
			require.Positive(t, info.Size())
		})
	}
}

type bothWinAdd struct{ *rs.InMemoryManager }

func (m bothWinAdd) AddRemoteLogSegmentMetadata(ctx context.Context, s rs.RemoteLogSegmentMetadata) error {
	if err := m.InMemoryManager.AddRemoteLogSegmentMetadata(ctx, s); err != nil && !errors.Is(err, rs.ErrInvalidAdd) {
		return err
	}
	return nil
}

type staleList struct {
	*rs.InMemoryManager
	mu    sync.Mutex
	calls int
	cache map[rs.TopicIDPartition][]rs.RemoteLogSegmentMetadata
}

func (m *staleList) ListRemoteLogSegments(ctx context.Context, tp rs.TopicIDPartition) ([]rs.RemoteLogSegmentMetadata, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if list, ok := m.cache[tp]; ok && m.calls%4 != 0 {
		return list, nil
	}
	list, err := m.InMemoryManager.ListRemoteLogSegments(ctx, tp)
	m.cache[tp] = list
	return list, err
}

// racingRefusal is the shape of a store whose update waits for another
// update's lock on the segment but keeps a snapshot from before that one
// committed: it decides on the state before the other update, and reports
// the state after it. Here the update that follows another of the same
// segment plays the waiting one.
type racingRefusal struct {
	*rs.InMemoryManager
	mu     sync.Mutex
	state  map[uuid.UUID]rs.RemoteLogSegmentState
	before map[uuid.UUID]rs.RemoteLogSegmentState // set by an update that changed the state, taken by the next
}

func (m *racingRefusal) AddRemoteLogSegmentMetadata(ctx context.Context, s rs.RemoteLogSegmentMetadata) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	err := m.InMemoryManager.AddRemoteLogSegmentMetadata(ctx, s)
	if err == nil {
		m.state[s.SegmentID.ID] = s.State
	}
	return err
}

func (m *racingRefusal) UpdateRemoteLogSegmentMetadata(ctx context.Context, u rs.RemoteLogSegmentMetadataUpdate) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := u.SegmentID.ID
	before, raced := m.before[id]
	delete(m.before, id)
	if raced && !rs.SegmentTransitionAllowed(before, u.State) {
		found := m.state[id]
		return &reportedError{msg: fmt.Sprintf("segment %s: %s to %s", id, found, u.State), sentinel: rs.ErrInvalidSegmentTransition, segment: found, segmentFound: true}
	}
	err := m.InMemoryManager.UpdateRemoteLogSegmentMetadata(ctx, u)
	if err == nil && m.state[id] != u.State {
		m.before[id], m.state[id] = m.state[id], u.State
	}
	return err
}

// TestLinearizabilityModelFoundState: a refusal is linearized only where the
// segment or partition was in the state the refusal names. Two updates of
// one segment overlap: DELETE_SEGMENT_STARTED succeeds, and
// DELETE_SEGMENT_FINISHED is refused. Had the refusal found
// COPY_SEGMENT_FINISHED, it came first; had it found
// DELETE_SEGMENT_STARTED, which allows DELETE_SEGMENT_FINISHED, no order
// explains it. The same for two partition-delete events.
func TestLinearizabilityModelFoundState(t *testing.T) {
	t.Parallel()
	op := func(client int, call, ret int64, in linInput, res string, found int8) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Call: call, Return: ret, Output: linOutput{res: res, found: found}}
	}
	finished := []porcupine.Operation{
		op(0, 0, 1, linInput{kind: linAdd}, "ok", 0),
		op(0, 2, 3, linInput{kind: linUpdate, to: int8(rs.CopySegmentFinished)}, "ok", 0),
	}
	racing := func(found rs.RemoteLogSegmentState, refusedCall int64) []porcupine.Operation {
		return append(slices.Clone(finished),
			op(0, 10, 20, linInput{kind: linUpdate, to: int8(rs.DeleteSegmentStarted)}, "ok", 0),
			op(1, refusedCall, refusedCall+10, linInput{kind: linUpdate, to: int8(rs.DeleteSegmentFinished)}, linRefusedUpdate(int8(found)), int8(found)))
	}
	require.True(t, porcupine.CheckOperations(linModel, racing(rs.CopySegmentFinished, 11)))
	require.False(t, porcupine.CheckOperations(linModel, racing(rs.DeleteSegmentStarted, 11)))
	require.False(t, porcupine.CheckOperations(linModel, racing(rs.CopySegmentFinished, 21)), "called after the other returned")

	deletes := func(found int8) []porcupine.Operation {
		return []porcupine.Operation{
			op(0, 10, 20, linInput{kind: linDelete, to: int8(rs.DeletePartitionMarked)}, "ok", 0),
			op(1, 11, 21, linInput{kind: linDelete, to: int8(rs.DeletePartitionStarted)}, linRefusedDelete(found), found),
		}
	}
	require.True(t, porcupine.CheckOperations(linModel, deletes(-1)))
	require.False(t, porcupine.CheckOperations(linModel, deletes(int8(rs.DeletePartitionMarked))))
}
