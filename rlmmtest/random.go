package rlmmtest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
)

const (
	// DefaultRandomSteps is the randomized test's length without
	// RLMMTEST_STEPS: about 10 s against a PostgreSQL manager.
	DefaultRandomSteps = 1500

	randomOffsets = 40 // offsets live in [0, randomOffsets): overlaps are common
	randomEpochs  = 4  // epochs live in [0, randomEpochs)
)

// RandomSeed is the randomized test's seed: RLMMTEST_SEED when set, else the
// clock.
func RandomSeed() (uint64, error) {
	if v := os.Getenv("RLMMTEST_SEED"); v != "" {
		return strconv.ParseUint(v, 10, 64)
	}
	return uint64(time.Now().UnixNano()), nil
}

// RandomSteps is the randomized test's length: RLMMTEST_STEPS when set, else
// DefaultRandomSteps.
func RandomSteps() (int, error) {
	if v := os.Getenv("RLMMTEST_STEPS"); v != "" {
		return strconv.Atoi(v)
	}
	return DefaultRandomSteps, nil
}

// randomRun drives the manager and a Model through the same random sequence
// of calls and compares every answer.
type randomRun struct {
	e       *env
	model   *Model
	rnd     *rand.Rand
	seed    uint64
	step    int
	op      string   // what the current step does
	history []string // the last steps, printed on failure
	parts   []rs.TopicIDPartition
	unknown rs.TopicIDPartition // never written to
	ids     []rs.RemoteLogSegmentID
	topics  []rs.TopicIDPartition // one per topic, partition 0; new partitions are cut from them
	stats   map[string]int        // "<op> ok" / "<op> refused", logged at the end
}

func (s *suite) randomized(t *testing.T) {
	s.run(t, "model_based", func(e *env) {
		seed, err := RandomSeed()
		require.NoError(e.t, err, "RLMMTEST_SEED")
		steps, err := RandomSteps()
		require.NoError(e.t, err, "RLMMTEST_STEPS")
		e.t.Logf("randomized: seed %d, %d steps (reproduce with RLMMTEST_SEED=%d RLMMTEST_STEPS=%d)", seed, steps, seed, steps)
		r := &randomRun{e: e, model: NewModel(CustomMetadataLimit), rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), seed: seed, stats: map[string]int{}}
		e.t.Cleanup(func() {
			if e.t.Failed() {
				e.t.Logf("randomized: failed at step %d of seed %d; the last steps were:\n%s\nreproduce with RLMMTEST_SEED=%d RLMMTEST_STEPS=%d",
					r.step, seed, strings.Join(r.history, "\n"), seed, steps)
			}
		})
		r.init()
		for r.step = 1; r.step <= steps; r.step++ {
			r.randomStep()
			if r.step%250 == 0 {
				r.checkAll(false)
			}
		}
		r.op = "final check"
		r.checkAll(true)
		e.t.Logf("randomized: %d partitions, %d segments added; outcomes %v", len(r.parts), len(r.ids), r.stats)
	})
}

func (r *randomRun) uuid() uuid.UUID {
	var u uuid.UUID
	for i := range u {
		u[i] = byte(r.rnd.Uint32())
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

func (r *randomRun) init() {
	a := rs.TopicIDPartition{TopicID: r.uuid(), Topic: "rand-a", Partition: 0}
	b := rs.TopicIDPartition{TopicID: r.uuid(), Topic: "rand-b", Partition: 0}
	r.topics = []rs.TopicIDPartition{a, b}
	r.parts = []rs.TopicIDPartition{a, withPartition(a, 1), b}
	r.unknown = rs.TopicIDPartition{TopicID: r.uuid(), Topic: "rand-unknown", Partition: 0}
}

// msg is the failure context of every check.
func (r *randomRun) msg(what string, args ...any) string {
	return fmt.Sprintf("seed %d step %d (%s): %s", r.seed, r.step, r.op, fmt.Sprintf(what, args...))
}

func (r *randomRun) record(op string) {
	r.op = op
	r.history = append(r.history, fmt.Sprintf("%5d %s", r.step, op))
	if len(r.history) > 40 {
		r.history = r.history[1:]
	}
}

func short(id uuid.UUID) string { return id.String()[:8] }

func describeTP(tp rs.TopicIDPartition) string {
	return fmt.Sprintf("%s/%s-%d", short(tp.TopicID), tp.Topic, tp.Partition)
}

func describeSegment(s rs.RemoteLogSegmentMetadata) string {
	var eps []string
	keys := mapsKeys(s.SegmentLeaderEpochs)
	slices.Sort(keys)
	for _, e := range keys {
		eps = append(eps, fmt.Sprintf("%d:%d", e, s.SegmentLeaderEpochs[e]))
	}
	return fmt.Sprintf("id %s tp %s state %s [%d,%d] epochs{%s} size %d txnEmpty %t meta %dB",
		short(s.SegmentID.ID), describeTP(s.SegmentID.TopicIDPartition), stateName(s.State), s.StartOffset, s.EndOffset,
		strings.Join(eps, " "), s.SegmentSizeInBytes, s.TxnIndexEmpty, len(s.CustomMetadata))
}

func mapsKeys(m map[rs.LeaderEpoch]int64) []rs.LeaderEpoch {
	out := make([]rs.LeaderEpoch, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// pick returns one of choices, weighted.
func (r *randomRun) weighted(weights ...int) int {
	total := 0
	for _, w := range weights {
		total += w
	}
	n := r.rnd.IntN(total)
	for i, w := range weights {
		if n < w {
			return i
		}
		n -= w
	}
	panic("unreachable")
}

func (r *randomRun) randomStep() {
	switch r.weighted(30, 7, 3, 35, 3, 22) {
	case 0:
		r.add(r.validSegment(r.livePartition()))
	case 1:
		r.add(r.invalidSegment())
	case 2:
		s := r.validSegment(r.anyPartition())
		if len(r.ids) > 0 {
			s.SegmentID.ID = r.ids[r.rnd.IntN(len(r.ids))].ID // taken
		}
		r.add(s)
	case 3:
		r.update()
	case 4:
		r.partitionDelete()
	default:
		r.record("query")
		r.queryRandomly(r.anyPartitionOrUnknown(), 1)
	}
}

// deleteState peeks at the model: the partition's delete record.
func (r *randomRun) deleteState(tp rs.TopicIDPartition) (rs.RemotePartitionDeleteState, bool) {
	r.model.mu.Lock()
	defer r.model.mu.Unlock()
	if p := r.model.parts[keyOf(tp)]; p != nil {
		return p.deleteState, p.hasDelete
	}
	return 0, false
}

func (r *randomRun) livePartition() rs.TopicIDPartition {
	var live []rs.TopicIDPartition
	for _, tp := range r.parts {
		if _, has := r.deleteState(tp); !has {
			live = append(live, tp)
		}
	}
	if len(live) == 0 || r.rnd.IntN(10) == 0 {
		return r.anyPartition()
	}
	return live[r.rnd.IntN(len(live))]
}

func (r *randomRun) anyPartition() rs.TopicIDPartition { return r.parts[r.rnd.IntN(len(r.parts))] }

func (r *randomRun) anyPartitionOrUnknown() rs.TopicIDPartition {
	if r.rnd.IntN(12) == 0 {
		return r.unknown
	}
	return r.anyPartition()
}

func (r *randomRun) customMetadata(allowOverLimit bool) []byte {
	switch r.weighted(40, 45, 10, 5) {
	case 0:
		return nil
	case 1:
		b := make([]byte, 1+r.rnd.IntN(16))
		for i := range b {
			b[i] = byte(r.rnd.Uint32())
		}
		return b
	case 2:
		return bytes.Repeat([]byte{byte(r.rnd.Uint32())}, CustomMetadataLimit)
	default:
		if allowOverLimit {
			return bytes.Repeat([]byte{'x'}, CustomMetadataLimit+1)
		}
		return []byte{}
	}
}

func (r *randomRun) validSegment(tp rs.TopicIDPartition) rs.RemoteLogSegmentMetadata {
	start := r.rnd.Int64N(randomOffsets - 4)
	end := min(start+r.rnd.Int64N(8), randomOffsets-1)
	n := int(end - start + 1)
	k := min(1+r.weighted(50, 35, 15), n)
	epochList := r.rnd.Perm(randomEpochs)[:k]
	slices.Sort(epochList)
	offs := r.rnd.Perm(n)[:k]
	slices.Sort(offs)
	if r.rnd.IntN(5) != 0 {
		offs[0] = 0 // usually the first epoch starts the segment
	}
	eps := map[rs.LeaderEpoch]int64{}
	for i, e := range epochList {
		eps[rs.LeaderEpoch(e)] = start + int64(offs[i])
	}
	return rs.RemoteLogSegmentMetadata{
		SegmentID:           rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: r.uuid()},
		StartOffset:         start,
		EndOffset:           end,
		MaxTimestampMs:      r.rnd.Int64N(randomTimestamps) * 1000, // few values: ties, and not monotonic in the offsets
		BrokerID:            r.rnd.Int32N(10),
		EventTimestampMs:    r.rnd.Int64N(1 << 42),
		SegmentSizeInBytes:  r.rnd.Int32N(1 << 20),
		CustomMetadata:      r.customMetadata(false),
		State:               rs.CopySegmentStarted,
		SegmentLeaderEpochs: eps,
		TxnIndexEmpty:       r.rnd.IntN(3) != 0,
	}
}

// invalidSegment breaks one rule of API.md "Add" (some mutations may happen
// to keep the segment valid; the model decides).
func (r *randomRun) invalidSegment() rs.RemoteLogSegmentMetadata {
	s := r.validSegment(r.livePartition())
	tp := &s.SegmentID.TopicIDPartition
	maxEpoch := slices.Max(mapsKeys(s.SegmentLeaderEpochs))
	switch r.rnd.IntN(14) {
	case 0:
		s.State = []rs.RemoteLogSegmentState{rs.CopySegmentFinished, rs.DeleteSegmentStarted, rs.DeleteSegmentFinished, 5, -1}[r.rnd.IntN(5)]
	case 1:
		tp.TopicID = uuid.Nil
	case 2:
		s.SegmentID.ID = uuid.Nil
	case 3:
		tp.Topic = []string{"", ".", "..", "a/b", "a b", strings.Repeat("t", 250)}[r.rnd.IntN(6)]
	case 4:
		tp.Partition = -1
	case 5:
		s.StartOffset = -1
	case 6:
		s.EndOffset = s.StartOffset - 1
	case 7:
		s.SegmentLeaderEpochs = map[rs.LeaderEpoch]int64{}
	case 8:
		s.SegmentLeaderEpochs[-1] = s.StartOffset
	case 9:
		s.SegmentLeaderEpochs[maxEpoch] = s.EndOffset + 1
	case 10:
		s.SegmentLeaderEpochs[maxEpoch+1] = s.SegmentLeaderEpochs[maxEpoch] // not strictly increasing
	case 11:
		s.SegmentSizeInBytes = -1
	case 12:
		s.CustomMetadata = bytes.Repeat([]byte{'x'}, CustomMetadataLimit+1)
	default:
		for e := range s.SegmentLeaderEpochs {
			s.SegmentLeaderEpochs[e] = s.StartOffset - 1
			break
		}
	}
	return s
}

func (r *randomRun) add(s rs.RemoteLogSegmentMetadata) {
	r.record("add " + describeSegment(s))
	want := r.model.AddRemoteLogSegmentMetadata(r.e.ctx, cloneSegment(s))
	got := r.e.m.AddRemoteLogSegmentMetadata(r.e.ctx, s)
	r.requireSameError(want, got)
	if want == nil {
		r.ids = append(r.ids, s.SegmentID)
	}
	if validTP(s.SegmentID.TopicIDPartition) {
		r.checkPartition(s.SegmentID.TopicIDPartition)
	}
}

// segmentState peeks at the model: the stored segment an update of id finds.
func (r *randomRun) segmentState(id rs.RemoteLogSegmentID) (rs.RemoteLogSegmentState, bool) {
	r.model.mu.Lock()
	defer r.model.mu.Unlock()
	if s := r.model.findForUpdate(id); s != nil {
		return s.md.State, true
	}
	return 0, false
}

func (r *randomRun) update() {
	var id rs.RemoteLogSegmentID
	switch {
	case len(r.ids) == 0 || r.rnd.IntN(20) == 0:
		id = rs.RemoteLogSegmentID{TopicIDPartition: r.anyPartition(), ID: r.uuid()}
	case r.rnd.IntN(10) == 0:
		id = r.ids[r.rnd.IntN(len(r.ids))]
		id.TopicIDPartition = r.anyPartition() // often another partition
	default:
		// Mostly the latest segments, whose lifecycles are still going on.
		n := len(r.ids)
		id = r.ids[n-1-min(n-1, int(r.rnd.ExpFloat64()*6))]
	}
	from, found := r.segmentState(id)
	var to rs.RemoteLogSegmentState
	switch r.weighted(60, 25, 10, 5) {
	case 0:
		if next := modelSegmentTransitions[from]; found && len(next) > 0 {
			to = next[r.rnd.IntN(len(next))]
		} else {
			to = rs.RemoteLogSegmentState(1 + r.rnd.IntN(3))
		}
	case 1:
		to = rs.RemoteLogSegmentState(1 + r.rnd.IntN(3))
	case 2:
		to = rs.CopySegmentStarted
	default:
		to = []rs.RemoteLogSegmentState{4, 7, -1, 127}[r.rnd.IntN(4)]
	}
	u := rs.RemoteLogSegmentMetadataUpdate{
		SegmentID:        id,
		EventTimestampMs: r.rnd.Int64N(1 << 42),
		// API.md does not order "not found" against "custom metadata too
		// long" for a valid target state: never ask for both.
		CustomMetadata: r.customMetadata(found || !updateTargetAllowed(to)),
		State:          to,
		BrokerID:       r.rnd.Int32N(10),
	}
	r.record(fmt.Sprintf("update id %s tp %s to %s broker %d meta %v (model: found %t, from %s)",
		short(id.ID), describeTP(id.TopicIDPartition), stateName(to), u.BrokerID, metaDesc(u.CustomMetadata), found, stateName(from)))
	want := r.model.UpdateRemoteLogSegmentMetadata(r.e.ctx, u)
	got := r.e.m.UpdateRemoteLogSegmentMetadata(r.e.ctx, u)
	r.requireSameError(want, got)
	r.checkPartition(id.TopicIDPartition)
	for _, known := range r.ids {
		if known.ID == id.ID && known.TopicIDPartition != id.TopicIDPartition {
			r.checkPartition(known.TopicIDPartition)
		}
	}
}

func metaDesc(b []byte) string {
	if b == nil {
		return "nil"
	}
	return fmt.Sprintf("%dB", len(b))
}

func (r *randomRun) partitionDelete() {
	tp := r.anyPartition()
	from, has := r.deleteState(tp)
	var to rs.RemotePartitionDeleteState
	switch r.weighted(60, 30, 10) {
	case 0: // the next state
		switch {
		case !has:
			to = rs.DeletePartitionMarked
		case from == rs.DeletePartitionFinished:
			to = from
		default:
			to = from + 1
		}
	case 1:
		to = deleteStates[r.rnd.IntN(len(deleteStates))]
	default:
		to = []rs.RemotePartitionDeleteState{3, -1, 100}[r.rnd.IntN(3)]
	}
	r.record(fmt.Sprintf("partition delete %s from %s to %s", describeTP(tp), deleteStateName(from, has), deleteStateName(to, true)))
	d := rs.RemotePartitionDeleteMetadata{TopicIDPartition: tp, State: to, EventTimestampMs: r.rnd.Int64N(1 << 42), BrokerID: r.rnd.Int32N(10)}
	want := r.model.PutRemotePartitionDeleteMetadata(r.e.ctx, d)
	got := r.e.m.PutRemotePartitionDeleteMetadata(r.e.ctx, d)
	r.requireSameError(want, got)
	if want == nil && !has {
		// Keep adds going: a new partition for each one being deleted.
		base := r.topics[r.rnd.IntN(len(r.topics))]
		r.parts = append(r.parts, withPartition(base, int32(len(r.parts))))
	}
	r.checkPartition(tp)
}

func sentinelOf(err error) error {
	for _, s := range allSentinels {
		if errors.Is(err, s) {
			return s
		}
	}
	return nil
}

func (r *randomRun) requireSameError(want, got error) {
	t := r.e.t
	t.Helper()
	kind, _, _ := strings.Cut(r.op, " ")
	if want == nil {
		r.stats[kind+" ok"]++
	} else {
		r.stats[kind+" refused"]++
	}
	if want == nil {
		require.NoError(t, got, r.msg("the model accepts this"))
		return
	}
	requireSentinel(t, got, sentinelOf(want), r.msg("the model refuses this: %v", want))
}
