package remotestorage

// stuck.go: the work a crashed or stuck broker left behind, as operators
// need to see it: uploads abandoned in COPY_SEGMENT_STARTED (their objects
// leak in remote storage, compare KAFKA-16511), deletions stuck in
// DELETE_SEGMENT_STARTED, and partition deletes stuck in
// DELETE_PARTITION_MARKED or DELETE_PARTITION_STARTED. What counts as stuck
// is decided in one place, the view rlmm_stuck_v (migrations/); this
// file only applies the threshold.

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/krabka/remotestorage/db"
)

// StuckKind tells a stuck segment from a stuck partition delete.
type StuckKind string

const (
	StuckSegment   StuckKind = "segment"
	StuckPartition StuckKind = "partition"
)

// StuckItem is one row of rlmm_stuck_v older than the threshold.
type StuckItem struct {
	Kind StuckKind
	// Partition is the segment's partition, or the partition being deleted.
	Partition TopicIDPartition
	// SegmentID is the stuck segment; uuid.Nil for a partition.
	SegmentID uuid.UUID
	// State is the state name: COPY_SEGMENT_STARTED, DELETE_SEGMENT_STARTED,
	// DELETE_PARTITION_MARKED or DELETE_PARTITION_STARTED.
	State string
	// StateCode is the stored code of State (segment or partition-delete
	// state, by Kind).
	StateCode int16
	// BrokerID wrote the latest state: the broker that crashed or got stuck.
	BrokerID int32
	// Since is the database time of the last write (updated_at), Age how
	// long ago that was on the database clock. EventTime is the broker's
	// clock for the same write.
	Since     time.Time
	Age       time.Duration
	EventTime time.Time
	// For a segment: its offsets and size (what may leak); zero for a
	// partition.
	StartOffset, EndOffset int64
	SizeBytes              int64
}

// StuckReport is the stuck work older than OlderThan, oldest first.
type StuckReport struct {
	OlderThan time.Duration
	Items     []StuckItem
}

// Segments counts the stuck segments, Partitions the stuck partition
// deletes.
func (r StuckReport) Segments() int   { return r.count(StuckSegment) }
func (r StuckReport) Partitions() int { return r.count(StuckPartition) }

func (r StuckReport) count(k StuckKind) int {
	n := 0
	for _, it := range r.Items {
		if it.Kind == k {
			n++
		}
	}
	return n
}

func checkOlderThan(olderThan time.Duration) error {
	if olderThan < 0 {
		return fmt.Errorf("remotestorage: stuck work: the threshold %s is negative; want 0 or more (0: everything in flight)", olderThan)
	}
	return nil
}

// StuckWork returns the segments in COPY_SEGMENT_STARTED or
// DELETE_SEGMENT_STARTED and the partitions in DELETE_PARTITION_MARKED or
// DELETE_PARTITION_STARTED whose last write is more than olderThan ago on
// the database's clock. Segments of a partition whose delete finished are
// forgotten and not reported. The query reads only the in-flight rows
// (partial indexes), however many finished segments there are.
//
// A negative olderThan is an error; a store failure wraps ErrIO.
func StuckWork(ctx context.Context, pool *pgxpool.Pool, olderThan time.Duration) (StuckReport, error) {
	if err := checkOlderThan(olderThan); err != nil {
		return StuckReport{}, err
	}
	rows, err := db.New().StuckWork(ctx, pool, olderThan.Milliseconds())
	if err != nil {
		return StuckReport{}, ioError(ctx, err, "read the stuck work older than %s", olderThan)
	}
	r := StuckReport{OlderThan: olderThan, Items: make([]StuckItem, len(rows))}
	for i, row := range rows {
		it := StuckItem{
			Kind:      StuckKind(row.Kind),
			Partition: TopicIDPartition{TopicID: uuid.UUID(row.TopicID), Topic: row.Topic, Partition: row.Partition},
			SegmentID: uuid.UUID(row.SegmentID),
			State:     row.State,
			StateCode: row.StateCode,
			BrokerID:  row.BrokerID,
			Since:     row.Since.Time,
			Age:       time.Duration(row.AgeMs) * time.Millisecond,
			EventTime: row.EventTime.Time,
		}
		if it.Kind == StuckSegment {
			it.StartOffset, it.EndOffset, it.SizeBytes = row.StartOffset, row.EndOffset, row.SizeBytes
		}
		r.Items[i] = it
	}
	return r, nil
}

// StuckCount is how many segments or partition deletes of one kind are
// stuck in one state.
type StuckCount struct {
	Kind  StuckKind
	State string // the state name, as in StuckItem.State
	Count int64
}

// CountStuckWork counts what StuckWork would return, by kind and state, in
// one query that returns only the counts; states with nothing stuck are
// absent. It is what the Prometheus collector of package metrics reports.
//
// A negative olderThan is an error; a store failure wraps ErrIO.
func CountStuckWork(ctx context.Context, pool *pgxpool.Pool, olderThan time.Duration) ([]StuckCount, error) {
	if err := checkOlderThan(olderThan); err != nil {
		return nil, err
	}
	rows, err := db.New().StuckCounts(ctx, pool, olderThan.Milliseconds())
	if err != nil {
		return nil, ioError(ctx, err, "count the stuck work older than %s", olderThan)
	}
	counts := make([]StuckCount, len(rows))
	for i, r := range rows {
		counts[i] = StuckCount{Kind: StuckKind(r.Kind), State: r.State, Count: r.Stuck}
	}
	return counts, nil
}
