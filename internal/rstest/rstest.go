// Package rstest is the test support shared by the root package's tests,
// the schema and migration tests of package migrations and the benchmarks of
// package bench: segments and updates to write, pools, managers, migrating
// over other migration files, waiting for a cache, counting statements, and
// a partition loaded with plain SQL. It uses only the library's public API (not the test hooks of
// the root package's export_test.go), so any package's tests can import it.
package rstest

import (
	"github.com/google/uuid"

	rs "github.com/krabka/remotestorage"
)

// TP returns partition partition of a new topic "orders".
func TP(partition int32) rs.TopicIDPartition {
	return rs.TopicIDPartition{TopicID: uuid.New(), Topic: "orders", Partition: partition}
}

// Segment returns a new segment of tp with offsets start..end and the given
// leader epochs (epoch to start offset), 1 KiB, in state
// COPY_SEGMENT_STARTED, with an empty transaction index.
func Segment(tp rs.TopicIDPartition, start, end int64, epochs map[rs.LeaderEpoch]int64) rs.RemoteLogSegmentMetadata {
	return rs.RemoteLogSegmentMetadata{
		SegmentID:           rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()},
		StartOffset:         start,
		EndOffset:           end,
		SegmentSizeInBytes:  1024,
		State:               rs.CopySegmentStarted,
		SegmentLeaderEpochs: epochs,
		TxnIndexEmpty:       true,
	}
}

// Update returns the update that takes s to state, from broker 1.
func Update(s rs.RemoteLogSegmentMetadata, state rs.RemoteLogSegmentState) rs.RemoteLogSegmentMetadataUpdate {
	return rs.RemoteLogSegmentMetadataUpdate{SegmentID: s.SegmentID, State: state, BrokerID: 1, EventTimestampMs: 1}
}
