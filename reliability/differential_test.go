package reliability_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/rlmmtest"
)

// TestDifferential applies one long random sequence of calls to
// InMemoryManager, PgManager and rlmmtest's independent Model side by side,
// and compares every answer after every step: the error of each write
// (by sentinel), then every kind of query about the partition it touched
// (the list; for two random epochs the list by epoch, highest offset, size
// and transaction-index walk; six random lookups), and every 250 steps
// every query of every epoch and every lookup of every partition written
// since the last such sweep, and at the end of every partition.
// RELIABILITY_SOAK=1 runs 20000 steps instead of 1000.
func TestDifferential(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.NewPool(t)
	pg, err := rs.NewPgManager(ctx, pool, rs.WithMaxCustomMetadataBytes(diffMetaLimit))
	require.NoError(t, err)
	t.Cleanup(pg.Close)
	d := &differential{
		t: t, ctx: ctx,
		names:    []string{"memory", "postgres", "model"},
		managers: []rlmmtest.Manager{rs.NewInMemoryManager(rs.WithMaxCustomMetadataBytes(diffMetaLimit)), pg, rlmmtest.NewModel(diffMetaLimit)},
		rnd:      rand.New(rand.NewPCG(seed(t), 7)),
	}
	steps := 1000
	if soak() {
		steps = 20000
	}
	for range 3 {
		d.parts = append(d.parts, newTP("diff", int32(len(d.parts))))
	}
	for d.step = 1; d.step <= steps; d.step++ {
		d.randomStep()
		if d.step%250 == 0 {
			d.op = "sweep"
			for tp := range d.touched {
				d.compareAll(tp, true)
			}
			clear(d.touched)
		}
	}
	for _, tp := range d.parts {
		d.compareAll(tp, true)
	}
	t.Logf("differential: %d steps over %d partitions, %d segments; outcomes %v", steps, len(d.parts), len(d.ids), d.stats)
}

const (
	diffMetaLimit = 32
	diffOffsets   = 50
	diffEpochs    = 4
)

type differential struct {
	t        *testing.T
	ctx      context.Context
	names    []string
	managers []rlmmtest.Manager
	rnd      *rand.Rand
	step     int
	op       string
	parts    []rs.TopicIDPartition
	touched  map[rs.TopicIDPartition]bool // written since the last sweep
	ids      []rs.RemoteLogSegmentID
	stats    map[string]int
}

func (d *differential) msg(format string, args ...any) string {
	return fmt.Sprintf("step %d (%s): %s", d.step, d.op, fmt.Sprintf(format, args...))
}

func (d *differential) randomStep() {
	if d.stats == nil {
		d.stats, d.touched = map[string]int{}, map[rs.TopicIDPartition]bool{}
	}
	tp := d.parts[d.rnd.IntN(len(d.parts))]
	defer func() { d.touched[tp] = true }()
	switch n := d.rnd.IntN(100); {
	case n < 35:
		s := d.segment(tp)
		d.op = fmt.Sprintf("add %s [%d,%d] %v", s.SegmentID.ID, s.StartOffset, s.EndOffset, s.SegmentLeaderEpochs)
		d.write("add", func(m rlmmtest.Manager) error { return m.AddRemoteLogSegmentMetadata(d.ctx, cloneSeg(s)) })
		d.ids = append(d.ids, s.SegmentID)
	case n < 40: // a taken id, perhaps under another partition
		if len(d.ids) == 0 {
			return
		}
		s := d.segment(tp)
		s.SegmentID.ID = d.ids[d.rnd.IntN(len(d.ids))].ID
		d.op = "add taken " + s.SegmentID.ID.String()
		d.write("add", func(m rlmmtest.Manager) error { return m.AddRemoteLogSegmentMetadata(d.ctx, cloneSeg(s)) })
	case n < 80:
		if len(d.ids) == 0 {
			return
		}
		// Mostly recent segments, whose lifecycles are going on.
		id := d.ids[len(d.ids)-1-min(len(d.ids)-1, int(d.rnd.ExpFloat64()*5))]
		if d.rnd.IntN(15) == 0 {
			id.TopicIDPartition = tp // often the wrong partition
		}
		tp = id.TopicIDPartition
		u := rs.RemoteLogSegmentMetadataUpdate{
			SegmentID: id, State: rs.RemoteLogSegmentState(d.rnd.IntN(5) - d.rnd.IntN(2)),
			BrokerID: d.rnd.Int32N(5), EventTimestampMs: d.rnd.Int64N(1 << 40), CustomMetadata: d.meta(),
		}
		d.op = fmt.Sprintf("update %s to %s meta %d bytes", id.ID, u.State, len(u.CustomMetadata))
		d.write("update", func(m rlmmtest.Manager) error { return m.UpdateRemoteLogSegmentMetadata(d.ctx, u) })
	case n < 83:
		pd := rs.RemotePartitionDeleteMetadata{TopicIDPartition: tp, State: rs.RemotePartitionDeleteState(d.rnd.IntN(4)), BrokerID: 1, EventTimestampMs: 1}
		d.op = fmt.Sprintf("partition delete %s to %s", tp, pd.State)
		if d.write("partition delete", func(m rlmmtest.Manager) error { return m.PutRemotePartitionDeleteMetadata(d.ctx, pd) }) && pd.State == rs.DeletePartitionMarked {
			d.parts = append(d.parts, newTP("diff", int32(len(d.parts)))) // keep adds going
		}
	default:
		d.op = "queries"
	}
	d.compareAll(tp, false)
}

// segment returns a random segment of tp, valid most of the time.
func (d *differential) segment(tp rs.TopicIDPartition) rs.RemoteLogSegmentMetadata {
	start := d.rnd.Int64N(diffOffsets - 5)
	end := min(diffOffsets-1, start+d.rnd.Int64N(10))
	epochs := map[rs.LeaderEpoch]int64{}
	first := rs.LeaderEpoch(d.rnd.IntN(diffEpochs))
	offset := start
	for e := first; e < diffEpochs && offset <= end; e++ {
		epochs[e] = offset
		offset += 1 + d.rnd.Int64N(5)
		if d.rnd.IntN(2) == 0 {
			break
		}
	}
	s := rs.RemoteLogSegmentMetadata{
		SegmentID:   rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()},
		StartOffset: start, EndOffset: end, MaxTimestampMs: d.rnd.Int64N(1 << 40),
		BrokerID: d.rnd.Int32N(5), EventTimestampMs: d.rnd.Int64N(1 << 40), SegmentSizeInBytes: d.rnd.Int32N(1 << 20),
		CustomMetadata: d.meta(), State: rs.CopySegmentStarted, SegmentLeaderEpochs: epochs, TxnIndexEmpty: d.rnd.IntN(3) != 0,
	}
	if d.rnd.IntN(12) == 0 { // one broken rule
		switch d.rnd.IntN(4) {
		case 0:
			s.EndOffset = s.StartOffset - 1
		case 1:
			s.CustomMetadata = bytes.Repeat([]byte{1}, diffMetaLimit+1)
		case 2:
			s.SegmentLeaderEpochs[first] = end + 1
		default:
			s.State = rs.CopySegmentFinished
		}
	}
	return s
}

func (d *differential) meta() []byte {
	switch d.rnd.IntN(4) {
	case 0:
		return nil
	case 1:
		return []byte{}
	default:
		b := make([]byte, d.rnd.IntN(diffMetaLimit+1))
		for i := range b {
			b[i] = byte(d.rnd.Uint32())
		}
		return b
	}
}

// write applies a write to every manager and requires the same outcome;
// it reports whether the write succeeded.
func (d *differential) write(kind string, f func(m rlmmtest.Manager) error) bool {
	t := d.t
	t.Helper()
	var errs []error
	for _, m := range d.managers {
		errs = append(errs, f(m))
	}
	want := sentinel(errs[0])
	for i, err := range errs {
		require.NotErrorIs(t, err, rs.ErrIO, d.msg("%s", d.names[i]))
		require.Equal(t, want, sentinel(err), d.msg("%s answers %v, %s answers %v", d.names[0], errs[0], d.names[i], err))
	}
	outcome := "ok"
	if want != nil {
		outcome = strings.TrimPrefix(want.Error(), "remotestorage: ")
	}
	d.stats[kind+": "+outcome]++
	return want == nil
}

// compareAll compares every query about tp; full adds every lookup of
// every epoch.
func (d *differential) compareAll(tp rs.TopicIDPartition, full bool) {
	t := d.t
	t.Helper()
	same(d, "list", func(m rlmmtest.Manager) ([]rs.RemoteLogSegmentMetadata, error) {
		return nilIfEmpty(m.ListRemoteLogSegments(d.ctx, tp))
	})
	// Every epoch in a full sweep, else two, one of them perhaps unused.
	epochs := []rs.LeaderEpoch{rs.LeaderEpoch(d.rnd.IntN(diffEpochs)), rs.LeaderEpoch(d.rnd.IntN(diffEpochs+2) - 1)}
	if full {
		epochs = []rs.LeaderEpoch{-1, 0, 1, 2, 3, 4}
	}
	for _, e := range epochs {
		same(d, fmt.Sprintf("list epoch %d", e), func(m rlmmtest.Manager) ([]rs.RemoteLogSegmentMetadata, error) {
			return nilIfEmpty(m.ListRemoteLogSegmentsByEpoch(d.ctx, tp, e))
		})
		same(d, fmt.Sprintf("highest epoch %d", e), func(m rlmmtest.Manager) (string, error) {
			o, ok, err := m.HighestOffsetForEpoch(d.ctx, tp, e)
			return fmt.Sprint(o, ok), err
		})
		same(d, fmt.Sprintf("size epoch %d", e), func(m rlmmtest.Manager) (int64, error) { return m.RemoteLogSize(d.ctx, tp, e) })
		from := d.rnd.Int64N(diffOffsets+2) - 1
		same(d, fmt.Sprintf("next txn epoch %d from %d", e, from), func(m rlmmtest.Manager) (found, error) {
			s, ok, err := m.NextSegmentWithTxnIndex(d.ctx, tp, e, from)
			return found{s, ok}, err
		})
		if full {
			for o := int64(-1); o <= diffOffsets; o++ {
				d.compareLookup(tp, e, o)
			}
		}
	}
	for range 6 {
		d.compareLookup(tp, rs.LeaderEpoch(d.rnd.IntN(diffEpochs)), d.rnd.Int64N(diffOffsets+2)-1)
	}
}

func (d *differential) compareLookup(tp rs.TopicIDPartition, e rs.LeaderEpoch, o int64) {
	d.t.Helper()
	same(d, fmt.Sprintf("lookup epoch %d offset %d", e, o), func(m rlmmtest.Manager) (found, error) {
		s, ok, err := m.RemoteLogSegmentMetadata(d.ctx, tp, e, o)
		return found{s, ok}, err
	})
}

// same requires every manager to answer q alike, without error.
func same[T any](d *differential, what string, q func(m rlmmtest.Manager) (T, error)) {
	t := d.t
	t.Helper()
	want, err := q(d.managers[0])
	require.NoError(t, err, d.msg("%s: %s", what, d.names[0]))
	for i, m := range d.managers[1:] {
		got, err := q(m)
		require.NoError(t, err, d.msg("%s: %s", what, d.names[i+1]))
		require.Equal(t, want, got, d.msg("%s: %s and %s differ", what, d.names[0], d.names[i+1]))
	}
}

func cloneSeg(s rs.RemoteLogSegmentMetadata) rs.RemoteLogSegmentMetadata {
	s.CustomMetadata = slices.Clone(s.CustomMetadata)
	epochs := make(map[rs.LeaderEpoch]int64, len(s.SegmentLeaderEpochs))
	for e, o := range s.SegmentLeaderEpochs {
		epochs[e] = o
	}
	s.SegmentLeaderEpochs = epochs
	return s
}

// nilIfEmpty: an empty list is an empty list, nil or not.
func nilIfEmpty(list []rs.RemoteLogSegmentMetadata, err error) ([]rs.RemoteLogSegmentMetadata, error) {
	if len(list) == 0 {
		return nil, err
	}
	return list, err
}
