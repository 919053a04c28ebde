package main

// ops.go: the operations measured, and the raw-SQL baselines that define
// the limit they are compared with.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	rs "github.com/krabka/remotestorage"
)

// manager is what both implementations offer.
type manager interface {
	rs.RemoteLogMetadataManager
	rs.SegmentStreams
}

// Operation names; the report keys on them.
const (
	opBaseSelect = "raw PK SELECT of a segment row"
	opBaseUpdate = "raw single-row UPDATE commit"
	opBaseList   = "raw range SELECT, 1k segment rows"
	opBaseListEp = "raw range SELECT, ~126 segment rows"
	// The writes send a NOTIFY at commit (the cache's change feed); these
	// two measure what that costs, and what moving it out would save.
	opBaseUpdateNotify     = "raw UPDATE commit with pg_notify, one statement"
	opBaseUpdateThenNotify = "raw UPDATE commit, then pg_notify alone"
	opBaseUpdateBatched    = "raw UPDATE commit, pg_notify batched by a sender"
	opBaseUpdateAsync      = "raw UPDATE commit, synchronous_commit=off (NOT durable)"
	opLookupHit            = "lookup: hit"
	opLookupGap            = "lookup: miss, offset in a gap"
	opLookupPast           = "lookup: miss, past the end"
	opLookupEpoch          = "lookup: miss, other epoch"
	opHighest              = "HighestOffsetForEpoch"
	opCaughtUp             = "CaughtUp"
	opList                 = "ListRemoteLogSegments (1k)"
	opStream               = "RemoteLogSegments stream (1k)"
	opListByEpoch          = "ListRemoteLogSegmentsByEpoch (~126)"
	opAdd                  = "AddRemoteLogSegmentMetadata"
	opUpdate               = "Update to COPY_SEGMENT_FINISHED"
	opMixedSoak            = "soak: 90% lookups, 10% writes"
	targetLookup           = 0.8
	targetWrite            = 0.7
	targetNone             = 0
	segmentColumns         = `topic_id, partition, segment_id, topic, start_offset, end_offset, max_timestamp_ms, broker_id,
	event_timestamp_ms, segment_size_bytes, custom_metadata, state, txn_index_empty, epochs, epoch_start_offsets,
	added_version, finished_version, last_version, last_xid, created_at, updated_at`
)

// namedOp is an operation with the baseline it is compared with.
type namedOp struct {
	name     string
	baseline string  // "" for a baseline
	target   float64 // minimum throughput ratio to the baseline; 0: none
	run      opFunc
}

// workload draws operations on a loaded shape: partitions [0, partitions),
// and remembers the segments its adds created for its updates.
type workload struct {
	s          shape
	partitions int
	nextStart  []atomic.Int64 // per partition: the start offset of the next add

	mu       sync.Mutex
	added    []rs.RemoteLogSegmentID
	toUpdate atomic.Int64

	notifier *notifier // for opBaseUpdateBatched
}

// notifier models sending the change feed's notifications outside the
// writing transactions: writers hand it a key after their commit, and one
// connection of its own sends whatever has queued up in one statement,
// SELECT pg_notify(…) FROM unnest(…). A NOTIFY-only transaction writes no
// WAL, so the commit lock NOTIFY takes is held for microseconds, not for a
// WAL flush.
type notifier struct {
	ch   chan string
	done chan struct{}
	sent atomic.Int64 // statements
}

func startNotifier(ctx context.Context, dsn string) (*notifier, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	n := &notifier{ch: make(chan string, 1<<16), done: make(chan struct{})}
	go func() {
		defer close(n.done)
		defer conn.Close(context.Background())
		var batch []string
		for key := range n.ch {
			batch = append(batch[:0], key)
			for more := true; more && len(batch) < 1000; {
				select {
				case k, ok := <-n.ch:
					if !ok {
						more = false
						break
					}
					batch = append(batch, k)
				default:
					more = false
				}
			}
			if _, err := conn.Exec(ctx, `SELECT pg_notify('rlmmbench_changes', k) FROM unnest($1::text[]) k`, batch); err != nil && ctx.Err() == nil {
				logf("notifier: %v", err)
			}
			n.sent.Add(1)
		}
	}()
	return n, nil
}

func (n *notifier) send(key string) {
	select {
	case n.ch <- key:
	default: // full: a real sender would coalesce per partition
	}
}

func (n *notifier) stop() {
	close(n.ch)
	<-n.done
}

func newWorkload(s shape, partitions int) *workload {
	w := &workload{s: s, partitions: partitions, nextStart: make([]atomic.Int64, partitions)}
	for p := range w.nextStart {
		w.nextStart[p].Store(int64(s.perPartition) * stride)
	}
	return w
}

// segmentAt draws a loaded segment and an offset in it.
func (w *workload) segmentAt(rng *rand.Rand) (p, j int, offset int64) {
	p, j = rng.IntN(w.partitions), rng.IntN(w.s.perPartition)
	return p, j, segmentStart(j) + rng.Int64N(segmentLen)
}

// wideRow receives a whole rlmm_segments row (segmentColumns, every column
// of the table: checkBaselineColumns fails the run when the schema has
// others), scanned into the Go types the generated code uses.
type wideRow struct {
	topicID, segmentID         pgtype.UUID // 16 bytes, no string, as the generated code scans
	partition, brokerID, size  int32
	topic                      string
	start, end, maxTS, eventTS int64
	added, last                int64
	finished                   pgtype.Int8
	lastXid                    uint64
	custom                     []byte
	state                      int16
	txnIndexEmpty              bool
	epochs                     []int32
	epochStarts                []int64
	created, updated           pgtype.Timestamptz
}

func (r *wideRow) dest() []any {
	return []any{&r.topicID, &r.partition, &r.segmentID, &r.topic, &r.start, &r.end, &r.maxTS, &r.brokerID,
		&r.eventTS, &r.size, &r.custom, &r.state, &r.txnIndexEmpty, &r.epochs, &r.epochStarts,
		&r.added, &r.finished, &r.last, &r.lastXid, &r.created, &r.updated}
}

// checkBaselineColumns fails when rlmm_segments has columns the baseline
// does not read, so that the baseline row stays as wide as a segment's.
func checkBaselineColumns(ctx context.Context, pool *pgxpool.Pool) error {
	var columns []string
	err := pool.QueryRow(ctx, `SELECT array_agg(column_name::text ORDER BY ordinal_position)
FROM information_schema.columns WHERE table_name = 'rlmm_segments' AND table_schema = current_schema()`).Scan(&columns)
	if err != nil {
		return err
	}
	want := strings.Join(strings.Fields(strings.ReplaceAll(segmentColumns, ",", " ")), ",")
	if got := strings.Join(columns, ","); got != want {
		return fmt.Errorf("rlmm_segments has columns %s, the baseline reads %s: update segmentColumns and wideRow in ops.go, and the loader", got, want)
	}
	return nil
}

// baselineOps are the raw pgx statements through pool: what one round trip
// costs with the same row types, and what one commit costs.
func (w *workload) baselineOps(pool *pgxpool.Pool) []namedOp {
	selectRow := func(ctx context.Context, rng *rand.Rand) (int, error) {
		p, j, _ := w.segmentAt(rng)
		tp := w.s.tp(p)
		var r wideRow
		err := pool.QueryRow(ctx, `SELECT `+segmentColumns+` FROM rlmm_segments
WHERE topic_id = $1 AND partition = $2 AND segment_id = $3`, rawID(tp.TopicID), tp.Partition, rawID(w.s.segmentID(p, j))).Scan(r.dest()...)
		return 1, err
	}
	updateRow := func(ctx context.Context, rng *rand.Rand) (int, error) {
		p, j, _ := w.segmentAt(rng)
		tp := w.s.tp(p)
		tag, err := pool.Exec(ctx, `UPDATE rlmm_segments SET event_timestamp_ms = $4
WHERE topic_id = $1 AND partition = $2 AND segment_id = $3`, rawID(tp.TopicID), tp.Partition, rawID(w.s.segmentID(p, j)), rng.Int64())
		if err == nil && tag.RowsAffected() != 1 {
			err = fmt.Errorf("updated %d rows", tag.RowsAffected())
		}
		return 1, err
	}
	updateNotify := func(ctx context.Context, rng *rand.Rand) (int, error) {
		p, j, _ := w.segmentAt(rng)
		tp := w.s.tp(p)
		var n int
		err := pool.QueryRow(ctx, `WITH u AS (
    UPDATE rlmm_segments SET event_timestamp_ms = $4
    WHERE topic_id = $1 AND partition = $2 AND segment_id = $3
    RETURNING topic_id, partition)
SELECT count(pg_notify('rlmmbench_changes', u.topic_id::text || '/' || u.partition)) FROM u`,
			rawID(tp.TopicID), tp.Partition, rawID(w.s.segmentID(p, j)), rng.Int64()).Scan(&n)
		if err == nil && n != 1 {
			err = fmt.Errorf("updated %d rows", n)
		}
		return 1, err
	}
	updateThenNotify := func(ctx context.Context, rng *rand.Rand) (int, error) {
		n, err := updateRow(ctx, rng)
		if err != nil {
			return n, err
		}
		_, err = pool.Exec(ctx, `SELECT pg_notify('rlmmbench_changes', $1::text)`, "after")
		return n, err
	}
	selectRange := func(ctx context.Context, p int, from, to int64) (int, error) {
		tp := w.s.tp(p)
		rows, err := pool.Query(ctx, `SELECT `+segmentColumns+` FROM rlmm_segments
WHERE topic_id = $1 AND partition = $2 AND state IN (0, 1, 2) AND start_offset BETWEEN $3 AND $4
ORDER BY start_offset, added_version`, rawID(tp.TopicID), tp.Partition, from, to)
		if err != nil {
			return 0, err
		}
		defer rows.Close()
		var out []wideRow
		for rows.Next() {
			var r wideRow
			if err := rows.Scan(r.dest()...); err != nil {
				return len(out), err
			}
			out = append(out, r)
		}
		return len(out), rows.Err()
	}
	return []namedOp{
		{name: opBaseSelect, run: selectRow},
		{name: opBaseUpdateBatched, baseline: opBaseUpdate, run: func(ctx context.Context, rng *rand.Rand) (int, error) {
			n, err := updateRow(ctx, rng)
			if err == nil && w.notifier != nil {
				w.notifier.send(strconv.Itoa(n))
			}
			return n, err
		}},
		{name: opBaseUpdate, run: updateRow},
		{name: opBaseUpdateNotify, baseline: opBaseUpdate, run: updateNotify},
		{name: opBaseUpdateThenNotify, baseline: opBaseUpdate, run: updateThenNotify},
		{name: opBaseList, run: func(ctx context.Context, rng *rand.Rand) (int, error) {
			return selectRange(ctx, rng.IntN(w.partitions), 0, int64(w.s.perPartition-1)*stride)
		}},
		{name: opBaseListEp, run: func(ctx context.Context, rng *rand.Rand) (int, error) {
			first, last := w.epochSegments(int32(rng.IntN(int(w.s.lastEpoch()) + 1)))
			return selectRange(ctx, rng.IntN(w.partitions), segmentStart(first), segmentStart(last))
		}},
	}
}

// epochSegments is the range of segments that carry epoch e.
func (w *workload) epochSegments(e int32) (first, last int) {
	return int(e) * epochEvery, min(int(e+1)*epochEvery, w.s.perPartition-1)
}

var errWrongAnswer = errors.New("wrong answer")

// readOps are the manager's queries, each checked against the shape.
func (w *workload) readOps(m manager) []namedOp {
	lookup := func(ctx context.Context, rng *rand.Rand, want func(j int, offset int64) (epoch int32, offsetOut int64, hit bool)) (int, error) {
		p, j, offset := w.segmentAt(rng)
		epoch, offset, hit := want(j, offset)
		s, ok, err := m.RemoteLogSegmentMetadata(ctx, w.s.tp(p), rs.LeaderEpoch(epoch), offset)
		switch {
		case err != nil:
			return 0, err
		case ok != hit || (hit && s.StartOffset != segmentStart(j)):
			return 0, fmt.Errorf("%w: lookup of epoch %d offset %d in partition %d: got %v (start %d), want %v (start %d)",
				errWrongAnswer, epoch, offset, p, ok, s.StartOffset, hit, segmentStart(j))
		}
		return 1, nil
	}
	lastEpoch := w.s.lastEpoch()
	return []namedOp{
		{name: opLookupHit, baseline: opBaseSelect, target: targetLookup, run: func(ctx context.Context, rng *rand.Rand) (int, error) {
			return lookup(ctx, rng, func(j int, offset int64) (int32, int64, bool) { return epochAt(j, offset), offset, true })
		}},
		{name: opLookupGap, baseline: opBaseSelect, target: targetLookup, run: func(ctx context.Context, rng *rand.Rand) (int, error) {
			return lookup(ctx, rng, func(j int, _ int64) (int32, int64, bool) {
				gap := segmentEnd(j) + 1 + rng.Int64N(stride-segmentLen)
				return epochAt(j, segmentEnd(j)), gap, false
			})
		}},
		{name: opLookupPast, baseline: opBaseSelect, target: targetLookup, run: func(ctx context.Context, rng *rand.Rand) (int, error) {
			return lookup(ctx, rng, func(int, int64) (int32, int64, bool) { return lastEpoch, 1<<40 + rng.Int64N(1<<30), false })
		}},
		{name: opLookupEpoch, baseline: opBaseSelect, target: targetLookup, run: func(ctx context.Context, rng *rand.Rand) (int, error) {
			return lookup(ctx, rng, func(j int, offset int64) (int32, int64, bool) {
				other := (epochAt(j, offset) + 1 + rng.Int32N(lastEpoch)) % (lastEpoch + 1)
				return other, offset, false
			})
		}},
		{name: opHighest, baseline: opBaseSelect, run: func(ctx context.Context, rng *rand.Rand) (int, error) {
			p, e := rng.IntN(w.partitions), rng.Int32N(lastEpoch+1)
			highest, ok, err := m.HighestOffsetForEpoch(ctx, w.s.tp(p), rs.LeaderEpoch(e))
			_, last := w.epochSegments(e)
			if err == nil && (!ok || highest != segmentEnd(last)) {
				err = fmt.Errorf("%w: highest offset of epoch %d: %d %v, want %d", errWrongAnswer, e, highest, ok, segmentEnd(last))
			}
			return 1, err
		}},
		{name: opCaughtUp, baseline: opBaseSelect, run: func(ctx context.Context, rng *rand.Rand) (int, error) {
			ok, err := m.CaughtUp(ctx, w.s.tp(rng.IntN(w.partitions)))
			if err == nil && !ok {
				err = fmt.Errorf("%w: not caught up", errWrongAnswer)
			}
			return 1, err
		}},
	}
}

// listOps are the lists on a 1k-segment partition, slice and stream.
func (w *workload) listOps(m manager) []namedOp {
	return []namedOp{
		{name: opList, baseline: opBaseList, run: func(ctx context.Context, rng *rand.Rand) (int, error) {
			list, err := m.ListRemoteLogSegments(ctx, w.s.tp(rng.IntN(w.partitions)))
			return len(list), err
		}},
		{name: opStream, baseline: opBaseList, run: func(ctx context.Context, rng *rand.Rand) (int, error) {
			n := 0
			for _, err := range m.RemoteLogSegments(ctx, w.s.tp(rng.IntN(w.partitions))) {
				if err != nil {
					return n, err
				}
				n++
			}
			return n, nil
		}},
		{name: opListByEpoch, baseline: opBaseListEp, run: func(ctx context.Context, rng *rand.Rand) (int, error) {
			e := rng.Int32N(w.s.lastEpoch() + 1)
			list, err := m.ListRemoteLogSegmentsByEpoch(ctx, w.s.tp(rng.IntN(w.partitions)), rs.LeaderEpoch(e))
			first, last := w.epochSegments(e)
			if err == nil && len(list) != last-first+1 {
				err = fmt.Errorf("%w: epoch %d lists %d segments, want %d", errWrongAnswer, e, len(list), last-first+1)
			}
			return len(list), err
		}},
	}
}

// addOp adds a segment after the end of a random partition, in a new epoch,
// and queues it for updateOp.
func (w *workload) addOp(m manager) namedOp {
	return namedOp{name: opAdd, baseline: opBaseUpdate, target: targetWrite, run: func(ctx context.Context, rng *rand.Rand) (int, error) {
		s := w.newSegment(rng)
		if err := m.AddRemoteLogSegmentMetadata(ctx, s); err != nil {
			return 0, err
		}
		w.mu.Lock()
		w.added = append(w.added, s.SegmentID)
		w.mu.Unlock()
		return 1, nil
	}}
}

func (w *workload) newSegment(rng *rand.Rand) rs.RemoteLogSegmentMetadata {
	p := rng.IntN(w.partitions)
	start := w.nextStart[p].Add(stride) - stride
	return rs.RemoteLogSegmentMetadata{
		SegmentID:           rs.RemoteLogSegmentID{TopicIDPartition: w.s.tp(p), ID: uuid.New()},
		StartOffset:         start,
		EndOffset:           start + segmentLen - 1,
		MaxTimestampMs:      baseTimestampMs + start,
		BrokerID:            int32(p % 6),
		EventTimestampMs:    baseTimestampMs + start,
		SegmentSizeInBytes:  segmentSizeBytes,
		CustomMetadata:      customMetadata(p, int(start/stride)),
		State:               rs.CopySegmentStarted,
		SegmentLeaderEpochs: map[rs.LeaderEpoch]int64{rs.LeaderEpoch(w.s.lastEpoch() + 1): start},
		TxnIndexEmpty:       true,
	}
}

// updateOp finishes the segments addOp added, in order; when all are
// finished it starts over (a finished segment may be finished again: an
// idempotent retry, still a full write).
func (w *workload) updateOp(m manager) namedOp {
	return namedOp{name: opUpdate, baseline: opBaseUpdate, target: targetWrite, run: func(ctx context.Context, rng *rand.Rand) (int, error) {
		w.mu.Lock()
		n := len(w.added)
		if n == 0 {
			w.mu.Unlock()
			return 0, errors.New("no added segment to update")
		}
		id := w.added[int(w.toUpdate.Add(1)-1)%n]
		w.mu.Unlock()
		return 1, m.UpdateRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadataUpdate{
			SegmentID: id, State: rs.CopySegmentFinished, BrokerID: 1, EventTimestampMs: baseTimestampMs,
		})
	}}
}

// loadMemory fills an InMemoryManager with the first partitions of s, every
// segment finished, through the public calls.
func loadMemory(ctx context.Context, m *rs.InMemoryManager, s shape, partitions int) error {
	for p := range partitions {
		for j := range s.perPartition {
			seg := s.segmentMetadata(p, j)
			if err := m.AddRemoteLogSegmentMetadata(ctx, seg); err != nil {
				return err
			}
			if err := m.UpdateRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadataUpdate{
				SegmentID: seg.SegmentID, State: rs.CopySegmentFinished, BrokerID: seg.BrokerID, EventTimestampMs: seg.EventTimestampMs,
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

// rawID is an id as the raw baselines pass it: pgx's own UUID type, encoded
// straight to its 16 bytes, as the generated code's type is (internal/dbuuid)
// and unlike a uuid.UUID, which pgx would round-trip through its string.
func rawID(id uuid.UUID) pgtype.UUID { return pgtype.UUID{Bytes: id, Valid: true} }
