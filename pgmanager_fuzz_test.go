package remotestorage_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/testwait"
	"github.com/krabka/remotestorage/rlmmtest"
)

// The fuzz targets. `make fuzz` runs each for FUZZTIME; `go test` runs
// their seeds (below and in testdata/fuzz/) as ordinary tests. Both need a
// database: each fuzzing worker process starts its own (package pgtest).

const fuzzMetaLimit = 64

// fuzzManagers returns the managers a fuzz target compares: the in-memory
// reference, PgManager on a fresh database, and rlmmtest's independent Model.
func fuzzManagers(f *testing.F) (names []string, fresh func() []rs.Manager) {
	pool := pgtest.NewPool(f)
	pg, err := rs.NewPgManager(context.Background(), pool, rs.WithMaxCustomMetadataBytes(fuzzMetaLimit))
	require.NoError(f, err)
	f.Cleanup(pg.Close)
	// PgManager keeps its one database across inputs; each input writes
	// under a fresh topic id. The in-memory managers are new for each input.
	return []string{"memory", "postgres", "model"}, func() []rs.Manager {
		return []rs.Manager{rs.NewInMemoryManager(rs.WithMaxCustomMetadataBytes(fuzzMetaLimit)), pg, rlmmtest.NewModel(fuzzMetaLimit)}
	}
}

func fuzzSentinel(err error) error {
	for _, s := range []error{rs.ErrInvalidAdd, rs.ErrSegmentNotFound, rs.ErrInvalidSegmentTransition, rs.ErrInvalidPartitionDeleteTransition, rs.ErrNotReady, rs.ErrIO} {
		if errors.Is(err, s) {
			return s
		}
	}
	return err
}

// decodeEpochs reads pairs of bytes as (epoch, offset - start), both
// signed, so that negative epochs and offsets outside the segment occur.
func decodeEpochs(start int64, blob []byte) map[rs.LeaderEpoch]int64 {
	if blob == nil {
		return nil
	}
	epochs := map[rs.LeaderEpoch]int64{}
	for i := 0; i+1 < len(blob) && i < 16; i += 2 {
		epochs[rs.LeaderEpoch(int8(blob[i]))] = start + int64(int8(blob[i+1]))
	}
	return epochs
}

// FuzzAddValidation: any add is accepted or refused alike by
// InMemoryManager, PgManager and the Model; a refused add names what it
// refuses and stores nothing; an accepted add reads back exactly as given.
func FuzzAddValidation(f *testing.F) {
	f.Add(int8(0), false, false, "orders", int32(0), int64(0), int64(99), []byte{0, 0, 1, 50}, int32(10), []byte("meta"))
	f.Add(int8(1), false, false, "orders", int32(0), int64(0), int64(99), []byte{0, 0}, int32(10), []byte(nil))
	f.Add(int8(0), true, false, "orders", int32(0), int64(0), int64(99), []byte{0, 0}, int32(10), []byte{})
	f.Add(int8(0), false, true, "orders", int32(0), int64(0), int64(99), []byte{0, 0}, int32(10), []byte{})
	f.Add(int8(0), false, false, "x'; DROP TABLE rlmm_segments; --", int32(0), int64(0), int64(9), []byte{0, 0}, int32(1), []byte{0})
	f.Add(int8(0), false, false, "naïve", int32(0), int64(0), int64(9), []byte{0, 0}, int32(1), []byte{0})
	f.Add(int8(0), false, false, "..", int32(-1), int64(-1), int64(9), []byte{255, 0}, int32(-1), bytes.Repeat([]byte{1}, fuzzMetaLimit+1))
	f.Add(int8(0), false, false, "t.t_t-1", int32(7), int64(10), int64(10), []byte{3, 0, 2, 0}, int32(0), []byte("\x00\xff'\\"))
	f.Add(int8(0), false, false, "t", int32(7), int64(9223372036854775800), int64(9223372036854775807), []byte{1, 0, 2, 3}, int32(0), []byte(nil))
	f.Add(int8(0), false, false, "t", int32(0), int64(0), int64(9), []byte(nil), int32(0), []byte(nil))
	names, fresh := fuzzManagers(f)
	f.Fuzz(func(t *testing.T, state int8, zeroTopicID, zeroSegmentID bool, topic string, partition int32, start, end int64, epochBlob []byte, size int32, meta []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(t))
		defer cancel()
		tp := rs.TopicIDPartition{TopicID: uuid.New(), Topic: topic, Partition: partition}
		if zeroTopicID {
			tp.TopicID = uuid.Nil
		}
		s := rs.RemoteLogSegmentMetadata{
			SegmentID:   rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()},
			StartOffset: start, EndOffset: end, MaxTimestampMs: start ^ end, BrokerID: partition, EventTimestampMs: end,
			SegmentSizeInBytes: size, CustomMetadata: meta, State: rs.RemoteLogSegmentState(state),
			SegmentLeaderEpochs: decodeEpochs(start, epochBlob), TxnIndexEmpty: size%2 == 0,
		}
		if zeroSegmentID {
			s.SegmentID.ID = uuid.Nil
		}
		managers := fresh()
		var errs []error
		for _, m := range managers {
			errs = append(errs, m.AddRemoteLogSegmentMetadata(ctx, cloneSegment(s)))
		}
		want := fuzzSentinel(errs[2])
		for i, err := range errs {
			require.NotErrorIs(t, err, rs.ErrIO, names[i])
			require.Equal(t, want, fuzzSentinel(err), "the model answers %v, %s %v", errs[2], names[i], err)
		}
		for i, m := range managers[:2] {
			list, err := m.ListRemoteLogSegments(ctx, tp)
			require.NoError(t, err, names[i])
			if want != nil {
				require.Empty(t, list, "%s stored a refused add", names[i])
				continue
			}
			require.Len(t, list, 1, names[i])
			require.Equal(t, s, list[0], "%s reads back another segment than it was given", names[i])
		}
	})
}

func cloneSegment(s rs.RemoteLogSegmentMetadata) rs.RemoteLogSegmentMetadata {
	s.CustomMetadata = slices.Clone(s.CustomMetadata)
	if s.SegmentLeaderEpochs != nil {
		epochs := make(map[rs.LeaderEpoch]int64, len(s.SegmentLeaderEpochs))
		for e, o := range s.SegmentLeaderEpochs {
			epochs[e] = o
		}
		s.SegmentLeaderEpochs = epochs
	}
	return s
}

// FuzzLookups: the blob describes up to eight segments (start, length,
// epochs, how far their lifecycle went), added and moved by every manager;
// then every lookup at and around every epoch boundary, the highest
// offsets, the lists, the sizes and the transaction-index walks must agree.
func FuzzLookups(f *testing.F) {
	f.Add([]byte{0, 9, 0, 1, 10, 9, 0, 1})
	f.Add([]byte{0, 19, 0x30, 1, 0, 19, 0x31, 1, 5, 3, 0x12, 2})                   // the same start twice: finish order decides
	f.Add([]byte{0, 29, 0x53, 1, 10, 29, 0x25, 1, 20, 5, 0x70, 1, 0, 29, 0x53, 3}) // overlaps and a forgotten one
	f.Add([]byte{200, 255, 0xff, 1, 250, 255, 0xff, 1, 0, 255, 0x0f, 2})
	names, fresh := fuzzManagers(f)
	f.Fuzz(func(t *testing.T, blob []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(t))
		defer cancel()
		tp := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "fuzz", Partition: 0}
		managers := fresh()
		var boundaries []int64
		for i := 0; i+3 < len(blob) && i < 32; i += 4 {
			start, length, epochBits, lifecycle := int64(blob[i]), int64(blob[i+1]%32), blob[i+2], blob[i+3]%5
			end := start + length
			// Epochs 0-3 present by the low bits, starting at offsets
			// spread over the segment by the high bits.
			epochs := map[rs.LeaderEpoch]int64{}
			at := start
			for e := range 4 {
				if epochBits&(1<<e) != 0 && at <= end {
					epochs[rs.LeaderEpoch(e)] = at
					boundaries = append(boundaries, at-1, at)
					at += 1 + int64(epochBits>>4)%(length/2+1)
				}
			}
			boundaries = append(boundaries, end, end+1)
			s := rs.RemoteLogSegmentMetadata{
				SegmentID:   rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()},
				StartOffset: start, EndOffset: end, SegmentSizeInBytes: int32(i), State: rs.CopySegmentStarted,
				SegmentLeaderEpochs: epochs, TxnIndexEmpty: blob[i+3]&0x10 == 0,
			}
			fuzzSame(t, names, managers, "add", func(m rs.Manager) error { return m.AddRemoteLogSegmentMetadata(ctx, cloneSegment(s)) })
			// lifecycle 0: started; 1: finished; 2: finished, delete
			// started; 3: deleted; 4: delete started without finishing.
			steps := map[byte][]rs.RemoteLogSegmentState{
				1: {rs.CopySegmentFinished},
				2: {rs.CopySegmentFinished, rs.DeleteSegmentStarted},
				3: {rs.CopySegmentFinished, rs.DeleteSegmentStarted, rs.DeleteSegmentFinished},
				4: {rs.DeleteSegmentStarted},
			}[lifecycle]
			for _, to := range steps {
				u := rs.RemoteLogSegmentMetadataUpdate{SegmentID: s.SegmentID, State: to, BrokerID: 1, EventTimestampMs: 2}
				fuzzSame(t, names, managers, "update", func(m rs.Manager) error { return m.UpdateRemoteLogSegmentMetadata(ctx, u) })
			}
		}
		slices.Sort(boundaries)
		boundaries = slices.Compact(boundaries)
		for e := rs.LeaderEpoch(-1); e <= 4; e++ {
			for _, o := range boundaries {
				fuzzQuery(t, names, managers, fmt.Sprintf("lookup epoch %d offset %d", e, o), func(m rs.Manager) (any, error) {
					s, ok, err := m.RemoteLogSegmentMetadata(ctx, tp, e, o)
					return []any{s, ok}, err
				})
			}
			fuzzQuery(t, names, managers, fmt.Sprintf("highest epoch %d", e), func(m rs.Manager) (any, error) {
				o, ok, err := m.HighestOffsetForEpoch(ctx, tp, e)
				return []any{o, ok}, err
			})
			fuzzQuery(t, names, managers, fmt.Sprintf("list epoch %d", e), func(m rs.Manager) (any, error) {
				list, err := m.ListRemoteLogSegmentsByEpoch(ctx, tp, e)
				return slices.Concat(list), err
			})
			fuzzQuery(t, names, managers, fmt.Sprintf("size epoch %d", e), func(m rs.Manager) (any, error) {
				return m.RemoteLogSize(ctx, tp, e)
			})
			fuzzQuery(t, names, managers, fmt.Sprintf("next txn epoch %d", e), func(m rs.Manager) (any, error) {
				s, ok, err := m.NextSegmentWithTxnIndex(ctx, tp, e, 0)
				return []any{s, ok}, err
			})
		}
		fuzzQuery(t, names, managers, "list", func(m rs.Manager) (any, error) {
			list, err := m.ListRemoteLogSegments(ctx, tp)
			return slices.Concat(list), err
		})
	})
}

// fuzzSame applies a write to every manager and requires one outcome.
func fuzzSame(t *testing.T, names []string, managers []rs.Manager, what string, write func(m rs.Manager) error) {
	t.Helper()
	var errs []error
	for _, m := range managers {
		errs = append(errs, write(m))
	}
	for i, err := range errs {
		require.NotErrorIs(t, err, rs.ErrIO, "%s: %s", what, names[i])
		require.Equal(t, fuzzSentinel(errs[0]), fuzzSentinel(err), "%s: %s answers %v, %s %v", what, names[0], errs[0], names[i], err)
	}
}

// fuzzQuery requires every manager to answer a query alike.
func fuzzQuery(t *testing.T, names []string, managers []rs.Manager, what string, query func(m rs.Manager) (any, error)) {
	t.Helper()
	want, err := query(managers[0])
	require.NoError(t, err, "%s: %s", what, names[0])
	for i, m := range managers[1:] {
		got, err := query(m)
		require.NoError(t, err, "%s: %s", what, names[i+1])
		require.Equal(t, want, got, "%s: %s and %s differ", what, names[0], names[i+1])
	}
}
