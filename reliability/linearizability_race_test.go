package reliability_test

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
)

// Racing transitions. The random workload of linearizability_test.go
// spreads its updates over many segments, so two writers rarely move one
// segment at once, and a refusal that overlaps the write it lost to is
// accepted by being placed before it. Here every client aims at the same
// few segments at the same moment. In each round, all clients work on one
// fresh partition of a few segments: each adds some of them and finishes
// some (COPY_SEGMENT_FINISHED); then they race: each update goes to the
// segment that the round's updates so far have reached, as
// DELETE_SEGMENT_STARTED or DELETE_SEGMENT_FINISHED, so all clients hit one
// segment at a time, with a query now and then. So one writer's DELETE_SEGMENT_STARTED often
// commits while another's DELETE_SEGMENT_FINISHED waits for the partition's
// lock: the store must decide the waiting one on the state the first left,
// and report that state if it refuses. Every other round ends with
// partition deletes racing on the partition of the round before.
//
// No client waits for another: a client that finishes its round moves to
// the newest round any client has started, skipping those it fell behind
// on, so the clients stay together without a barrier that a stalled client
// would hold up. Every round has a partition of its own, so porcupine
// checks each round apart. The rounds are short, two segments: with eight
// clients on one partition, the search for a linearization grows fast with
// the partition's length (four segments a round made some partitions take
// over a minute to check; two take under 0.1 s).

// linRace chooses the calls of the racing workload (linHarness.input).
type linRace struct {
	slots   int  // segments per partition, at most linSlots
	racers  int  // updates of each segment per client in the race
	deletes bool // partition deletes at the end of every other round

	newest  atomic.Int64 // the newest round a client has started
	mu      sync.Mutex
	raced   map[int]int // per round, the race updates handed out
	clients []raceClient
}

// raceClient is where one client is: its round and its step in it.
type raceClient struct {
	round, step, updates int
}

func newLinRace(clients, slots, racers int, deletes bool) *linRace {
	return &linRace{slots: slots, racers: racers, deletes: deletes, raced: map[int]int{}, clients: make([]raceClient, clients)}
}

// The steps of a round: two adds, two finishes, the race, two partition
// deletes (or lists).
const (
	raceFinish = 2
	raceRace   = 4
	raceEnd    = 5
	raceSteps  = 7
)

// input is client b's next call; client b calls it from one goroutine.
func (r *linRace) input(rnd *rand.Rand, b, _ int) linInput {
	c := &r.clients[b]
	if c.step == raceSteps {
		c.round, c.step, c.updates = max(c.round+1, int(r.newest.Load())), 0, 0
		for {
			n := r.newest.Load()
			if int64(c.round) <= n || r.newest.CompareAndSwap(n, int64(c.round)) {
				break
			}
		}
	}
	// Offsets within the slots in use, so that lookups find them.
	in := linInput{part: c.round, epoch: rs.LeaderEpoch(rnd.IntN(2)), offset: rnd.Int64N(int64((r.slots-1)/2*10 + 18))}
	switch {
	case c.step < raceFinish: // two adds and two finishes each: the clients between them cover every segment
		in.kind, in.slot = linAdd, (b+c.step)%r.slots
		c.step++
	case c.step < raceRace:
		in.kind, in.slot, in.to = linUpdate, (b+c.step)%r.slots, int8(rs.CopySegmentFinished)
		c.step++
	case c.step == raceRace:
		c.updates++
		if c.updates%(r.racers+1) == 0 {
			in.kind, in.slot = []linKind{linList, linList, linLookup, linLookup, linHighest}[rnd.IntN(5)], 0
			break
		}
		r.mu.Lock()
		j := r.raced[c.round]
		r.raced[c.round] = j + 1
		r.mu.Unlock()
		in.slot = j / (r.racers * len(r.clients))
		if in.slot >= r.slots {
			c.step = raceEnd
			return r.input(rnd, b, 0)
		}
		in.kind, in.to = linUpdate, int8(rs.DeleteSegmentStarted)+int8(rnd.IntN(2))
	case r.deletes && c.round%2 == 1 && c.round > 0:
		// MARKED or STARTED, then STARTED or FINISHED: racing clients
		// find the record in every state.
		in.kind, in.part, in.to = linDelete, c.round-1, int8(c.step-raceEnd+rnd.IntN(2))
		c.step++
	default:
		in.kind = linList
		c.step++
	}
	return in
}

// raceHarness is a harness running the racing workload until stop closes.
func raceHarness(t *testing.T, r *linRace) *linHarness {
	h := newLinHarness(t, 1)
	h.maxOps = 1 << 30
	h.input = r.input
	return h
}

// TestLinearizableRacingUpdates: eight clients on four managers, each with
// its own pool (two with WithCache), race transitions of the same segments
// for eight seconds.
func TestLinearizableRacingUpdates(t *testing.T) {
	dsn := sharedDatabase(t)
	bs := brokers(t, dsn, 2, brokerConfig{maxConns: 2})
	// The cached managers consume no partition: a cache hears of the other
	// managers' writes later, by notification, so only the database's
	// answers can be held to linearizability. Their writes still go through
	// the cache's bookkeeping.
	bs = append(bs, brokers(t, dsn, 2, brokerConfig{maxConns: 2, opts: []rs.Option{rs.WithCache()}})...)
	managers := append(managersOf(bs), managersOf(bs)...)
	h := raceHarness(t, newLinRace(len(managers), 2, 2, true))
	stop := make(chan struct{})
	timer := time.AfterFunc(8*time.Second, func() { close(stop) }) // the run's length
	defer timer.Stop()
	h.run(managers, stop)
	h.requireLinearizable()
}

// TestLinearizableRacingUpdatesRlmmd: the racing workload through two
// rlmmd processes on one database, eight clients, four on each, while one
// rlmmd is killed (SIGKILL: calls in flight cut) and restarted on its port,
// then the other frozen (SIGSTOP) for two seconds.
func TestLinearizableRacingUpdatesRlmmd(t *testing.T) {
	dsn := sharedDatabase(t)
	daemons := []*rlmmdProcess{startRlmmd(t, "rlmmd-a", dsn), startRlmmd(t, "rlmmd-b", dsn)}
	t.Logf("rlmmd built in %v", rlmmdBuild.took.Round(time.Millisecond))
	managers := make([]rs.RemoteLogMetadataManager, 8)
	for i := range managers {
		managers[i] = rpcManager{dialRlmmd(t, daemons[i%2].addr)}
	}
	h := raceHarness(t, newLinRace(len(managers), 2, 2, true))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { h.run(managers, stop) })
	stopped := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopped() // before the cleanups, should a fault fail the test

	pause := func(d time.Duration) { time.Sleep(d) } // the fault script's own timing
	pause(1500 * time.Millisecond)
	killed := time.Now()
	daemons[0].restartAfterKill()
	t.Logf("%s killed and serving again after %v", daemons[0].name, time.Since(killed).Round(time.Millisecond))
	pause(1500 * time.Millisecond)
	daemons[1].signal(syscall.SIGSTOP)
	pause(2 * time.Second)
	daemons[1].signal(syscall.SIGCONT)
	pause(2 * time.Second)
	stopped()
	require.NotEmpty(t, h.failed, "the faults failed no write")
	h.requireLinearizable()
}
