package reliability_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/testwait"
)

// The write workload of the fault tests. Each writer takes segments of its
// partition through their whole lifecycle (add, COPY_SEGMENT_FINISHED,
// DELETE_SEGMENT_STARTED, DELETE_SEGMENT_FINISHED), one call at a time, and
// records every call and its outcome. After a failed call it abandons the
// segment and starts a new one, so the state of every segment in the
// database says exactly which of its writes were applied: verify can then
// account for every acknowledged write, every failed one, and every stamp
// of the change feed.

type writeRecord struct {
	writer int
	add    bool
	seg    rs.RemoteLogSegmentMetadata // as added
	to     rs.RemoteLogSegmentState    // update target
	meta   []byte                      // update's custom metadata
	err    error
}

type workload struct {
	brokers    []*broker
	parts      []rs.TopicIDPartition
	writers    int
	opTimeout  time.Duration // per call
	retryPause time.Duration // a broker's pause after a failed call
	pace       time.Duration // pause after a successful call

	stop    chan struct{}
	wg      sync.WaitGroup
	records [][]writeRecord // by writer; each writer appends to its own
	acked   atomic.Int64
	failed  atomic.Int64

	backAt    atomic.Int64   // UnixNano when the database came back; 0: not marked
	firstOKAt []atomic.Int64 // by broker: first success after backAt
}

func newWorkload(bs []*broker, parts []rs.TopicIDPartition, writers int) *workload {
	return &workload{
		brokers: bs, parts: parts, writers: writers,
		opTimeout: 2 * time.Second, retryPause: 20 * time.Millisecond,
		stop: make(chan struct{}), records: make([][]writeRecord, writers),
		firstOKAt: make([]atomic.Int64, len(bs)),
	}
}

func (w *workload) start() {
	for i := range w.writers {
		w.wg.Go(func() { w.write(i) })
	}
}

// finish stops the writers and waits for them.
func (w *workload) finish() {
	close(w.stop)
	w.wg.Wait()
}

func (w *workload) stopped() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

func (w *workload) write(i int) {
	bi := i % len(w.brokers)
	b := w.brokers[bi]
	tp := w.parts[i%len(w.parts)]
	var cur *rs.RemoteLogSegmentMetadata
	next := int64(0)
	for !w.stopped() {
		rec := writeRecord{writer: i}
		ctx, cancel := context.WithTimeout(context.Background(), w.opTimeout)
		if cur == nil {
			start := next * 10
			next++
			seg := rs.RemoteLogSegmentMetadata{
				SegmentID:           rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()},
				StartOffset:         start,
				EndOffset:           start + 9,
				BrokerID:            int32(i),
				EventTimestampMs:    time.Now().UnixMilli(),
				SegmentSizeInBytes:  1000 + int32(next),
				CustomMetadata:      fmt.Appendf(nil, "w%d-add-%d", i, next),
				State:               rs.CopySegmentStarted,
				SegmentLeaderEpochs: map[rs.LeaderEpoch]int64{0: start, 1: start + 5},
				TxnIndexEmpty:       true,
			}
			rec.add, rec.seg = true, seg
			rec.err = b.m.AddRemoteLogSegmentMetadata(ctx, seg)
			if rec.err == nil {
				cur = &seg
			}
		} else {
			rec.seg, rec.to = *cur, cur.State+1
			rec.meta = fmt.Appendf(nil, "w%d-%s-%s", i, cur.SegmentID.ID, rec.to)
			rec.err = b.m.UpdateRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadataUpdate{
				SegmentID: cur.SegmentID, State: rec.to, BrokerID: int32(i),
				EventTimestampMs: time.Now().UnixMilli(), CustomMetadata: rec.meta,
			})
			if rec.err == nil {
				cur.State = rec.to
				if cur.State == rs.DeleteSegmentFinished {
					cur = nil
				}
			}
		}
		cancel()
		w.records[i] = append(w.records[i], rec)
		if rec.err != nil {
			w.failed.Add(1)
			cur = nil // abandoned: its state now tells which of its writes applied
			time.Sleep(w.retryPause)
			continue
		}
		w.acked.Add(1)
		if back := w.backAt.Load(); back != 0 {
			w.firstOKAt[bi].CompareAndSwap(0, time.Now().UnixNano())
		}
		if w.pace > 0 {
			time.Sleep(w.pace)
		}
	}
}

// markBack notes that the database is back from now on.
func (w *workload) markBack() time.Time {
	now := time.Now()
	for i := range w.firstOKAt {
		w.firstOKAt[i].Store(0)
	}
	w.backAt.Store(now.UnixNano())
	return now
}

// waitRecovered waits until every broker has had a call succeed since
// markBack and returns the longest wait.
func (w *workload) waitRecovered(t *testing.T) time.Duration {
	t.Helper()
	testwait.Until(t, "every broker has a successful write after the database came back", func() bool {
		for i := range w.firstOKAt {
			if w.firstOKAt[i].Load() == 0 {
				return false
			}
		}
		return true
	})
	var worst int64
	for i := range w.firstOKAt {
		worst = max(worst, w.firstOKAt[i].Load()-w.backAt.Load())
	}
	return time.Duration(worst)
}

// waitAcked waits until n more writes than now have been acknowledged.
func (w *workload) waitAcked(t *testing.T, n int64) {
	t.Helper()
	target := w.acked.Load() + n
	testwait.Until(t, fmt.Sprintf("%d acknowledged writes", target), func() bool { return w.acked.Load() >= target })
}

// report is what verify found.
type report struct {
	attempted, acked, failed int
	lost                     int // acknowledged, not in the database
	unknown                  int // failed with OutcomeUnknown
	unknownApplied           int // … and found applied by reading back
	knownNotApplied          int // failed with OutcomeUnknown false (and indeed not applied)
	problems                 []string
}

func (r report) String() string {
	return fmt.Sprintf("attempted %d, acknowledged %d, failed %d, lost %d; ambiguous %d (%d applied, %d not); certainly-not-applied %d; problems %d",
		r.attempted, r.acked, r.failed, r.lost, r.unknown, r.unknownApplied, r.unknown-r.unknownApplied, r.knownNotApplied, len(r.problems))
}

func (r *report) problem(format string, args ...any) {
	if len(r.problems) < 20 {
		r.problems = append(r.problems, fmt.Sprintf(format, args...))
	}
}

type storedSegment struct {
	partition      int32
	topicID        uuid.UUID
	state          rs.RemoteLogSegmentState
	start, end     int64
	epochs         []int32
	meta           []byte
	brokerID       int32
	epochRows      int
	epochRowsState int  // epoch rows whose state copy equals the segment's
	epochRowsFin   int  // epoch rows with a finished_version
	epochRowsLast  int  // epoch rows whose last_version copy equals the segment's
	updated        bool // last_version past added_version: an update stamped it
	finished       bool // finished_version set
}

// verify reads the database with a fresh pool on dsn and accounts for every
// write the workload recorded (see report). It checks each write's
// all-or-nothing-ness on the tables themselves (a segment and its epoch
// rows, a state and its metadata, a stamp and its change) and what
// ListRemoteLogSegments returns.
func verify(t *testing.T, dsn string, w *workload) report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(t))
	defer cancel()
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	defer pool.Close()

	topicIDs := make([]uuid.UUID, 0, len(w.parts))
	for _, tp := range w.parts {
		topicIDs = append(topicIDs, tp.TopicID)
	}
	stored := map[uuid.UUID]*storedSegment{}
	rows, err := pool.Query(ctx, `
		SELECT s.segment_id, s.topic_id, s.partition, s.state, s.start_offset, s.end_offset, s.epochs, s.custom_metadata, s.broker_id,
		       count(e.epoch), count(e.epoch) FILTER (WHERE e.state = s.state), count(e.finished_version),
		       count(e.epoch) FILTER (WHERE e.last_version = s.last_version), s.last_version > s.added_version, s.finished_version IS NOT NULL
		FROM rlmm_segments s
		LEFT JOIN rlmm_segment_epochs e ON e.topic_id = s.topic_id AND e.partition = s.partition AND e.segment_id = s.segment_id
		WHERE s.topic_id = ANY($1)
		GROUP BY s.topic_id, s.partition, s.segment_id`, topicIDs)
	require.NoError(t, err)
	for rows.Next() {
		var id uuid.UUID
		var s storedSegment
		var state int16
		require.NoError(t, rows.Scan(&id, &s.topicID, &s.partition, &state, &s.start, &s.end, &s.epochs, &s.meta, &s.brokerID,
			&s.epochRows, &s.epochRowsState, &s.epochRowsFin, &s.epochRowsLast, &s.updated, &s.finished))
		s.state = rs.RemoteLogSegmentState(state)
		stored[id] = &s
	}
	require.NoError(t, rows.Err())

	var r report
	added := map[uuid.UUID]rs.RemoteLogSegmentMetadata{}
	lastMeta := map[uuid.UUID][]byte{} // custom metadata of the write that set the stored state
	for _, recs := range w.records {
		for _, rec := range recs {
			r.attempted++
			id := rec.seg.SegmentID.ID
			s := stored[id]
			if rec.add {
				added[id] = rec.seg
			}
			target := rec.to
			if rec.add {
				target = rs.CopySegmentStarted
			}
			applied := s != nil && s.state >= target
			if rec.err == nil {
				r.acked++
				if !applied {
					r.lost++
					r.problem("acknowledged %s of segment %s (writer %d) is not in the database", describeWrite(rec), id, rec.writer)
				}
			} else {
				r.failed++
				if rs.OutcomeUnknown(rec.err) {
					r.unknown++
					if applied {
						r.unknownApplied++
					}
				} else {
					r.knownNotApplied++
					if applied {
						r.problem("%s of segment %s failed with %v, for which OutcomeUnknown is false, yet it was applied", describeWrite(rec), id, rec.err)
					}
				}
			}
			if applied && s.state == target {
				if rec.add {
					lastMeta[id] = rec.seg.CustomMetadata
				} else {
					lastMeta[id] = rec.meta
				}
			}
		}
	}

	for id, s := range stored {
		seg, ok := added[id]
		if !ok {
			r.problem("segment %s is in the database but no writer added it", id)
			continue
		}
		tp := seg.SegmentID.TopicIDPartition
		// Every update stamps the segment and the epoch rows with its
		// change, none without it.
		if s.updated != (s.state > rs.CopySegmentStarted) || s.finished != (s.state >= rs.CopySegmentFinished) || s.epochRowsLast != s.epochRows {
			r.problem("segment %s in %s is stamped apart from its changes: last_version past the add's %v, finished_version set %v, %d of %d epoch rows with its last_version",
				id, s.state, s.updated, s.finished, s.epochRowsLast, s.epochRows)
		}
		if s.start != seg.StartOffset || s.end != seg.EndOffset || !slices.Equal(s.epochs, []int32{0, 1}) || s.topicID != tp.TopicID || s.partition != tp.Partition {
			r.problem("segment %s is stored with other fields than added: %+v", id, *s)
		}
		if s.epochRows != 2 || s.epochRowsState != 2 {
			r.problem("segment %s in %s has %d epoch rows, %d of them in its state (want 2 and 2)", id, s.state, s.epochRows, s.epochRowsState)
		}
		if wantFin := map[bool]int{true: 2, false: 0}[s.state >= rs.CopySegmentFinished]; s.epochRowsFin != wantFin {
			r.problem("segment %s in %s has %d epoch rows with a finished version, want %d", id, s.state, s.epochRowsFin, wantFin)
		}
		if !bytes.Equal(s.meta, lastMeta[id]) {
			r.problem("segment %s in %s holds custom metadata %q, not that of the write that set the state (%q)", id, s.state, s.meta, lastMeta[id])
		}
	}

	// What brokers see.
	m, err := rs.NewPgManager(ctx, pool)
	require.NoError(t, err)
	defer m.Close()
	for _, tp := range w.parts {
		list, err := m.ListRemoteLogSegments(ctx, tp)
		require.NoError(t, err)
		want := 0
		for _, s := range stored {
			if s.topicID == tp.TopicID && s.partition == tp.Partition && s.state != rs.DeleteSegmentFinished {
				want++
			}
		}
		if len(list) != want {
			r.problem("ListRemoteLogSegments(%s) has %d segments, the table %d", tp, len(list), want)
		}
		for _, got := range list {
			s := stored[got.SegmentID.ID]
			if s == nil || got.State != s.state || !bytes.Equal(got.CustomMetadata, s.meta) || got.SegmentLeaderEpochs[1] != got.StartOffset+5 {
				r.problem("ListRemoteLogSegments(%s) returns segment %s as %+v", tp, got.SegmentID.ID, got)
			}
		}
	}
	return r
}

func describeWrite(rec writeRecord) string {
	if rec.add {
		return "add"
	}
	return "update to " + rec.to.String()
}

// requireAccounted fails unless verify found nothing wrong: no write lost,
// none half-applied, no failed write misclassified.
func requireAccounted(t *testing.T, r report) {
	t.Helper()
	require.Zero(t, r.lost, "acknowledged writes lost: %s\n%v", r, r.problems)
	require.Empty(t, r.problems, "%s", r)
	require.Positive(t, r.acked)
}

// requireWorkloadErrors checks every failed call's error.
func requireWorkloadErrors(t *testing.T, w *workload) {
	t.Helper()
	for _, recs := range w.records {
		for _, rec := range recs {
			if rec.err != nil {
				requireFaultError(t, rec.err, describeWrite(rec))
			}
		}
	}
}

// requireFaultError checks what a call may fail with while the database
// misbehaves: ErrIO, or the caller's own context error; never a refusal.
func requireFaultError(t *testing.T, err error, what string) {
	t.Helper()
	if errors.Is(err, rs.ErrIO) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		for _, refusal := range []error{rs.ErrInvalidAdd, rs.ErrSegmentNotFound, rs.ErrInvalidSegmentTransition, rs.ErrInvalidPartitionDeleteTransition, rs.ErrNotReady} {
			require.NotErrorIs(t, err, refusal, what)
		}
		return
	}
	t.Fatalf("%s: %v is neither ErrIO nor a context error", what, err)
}
