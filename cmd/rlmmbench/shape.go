package main

// shape.go: the synthetic data set. Everything about a segment is a pure
// function of (partition index, segment index), so the loader, the workload
// generators and the checks agree without storing anything.

import (
	"encoding/binary"
	"fmt"

	"github.com/google/uuid"

	rs "github.com/krabka/remotestorage"
)

// shape describes one family of partitions: partitions × perPartition
// finished segments. Segment j of a partition holds offsets
// [j*stride, j*stride+segmentLen-1]; the stride-segmentLen offsets after it
// are a gap. A new leader epoch starts every epochEvery segments, and the
// segment where it starts carries both epochs (the old one for its first
// half), so a partition of 1000 segments has 8 epochs and 7 two-epoch
// segments.
type shape struct {
	name               string // topic name prefix; also separates the ids of shapes
	partitions         int
	perPartition       int
	partitionsPerTopic int
}

const (
	stride     = 1000 // offsets from one segment's start to the next
	segmentLen = 990  // offsets in a segment; the last 10 of each stride are a gap
	epochEvery = 125  // segments per leader epoch
	// customMetadataLen is the size of every segment's custom metadata.
	customMetadataLen = 32
)

// newShape spreads segments over partitions of perPartition segments, 16
// partitions per topic.
func newShape(name string, segments, perPartition int) shape {
	perPartition = min(perPartition, segments)
	return shape{name: name, partitions: max(1, segments/perPartition), perPartition: perPartition, partitionsPerTopic: 16}
}

func (s shape) segments() int { return s.partitions * s.perPartition }

// lastEpoch is the largest epoch of the loaded segments of a partition.
func (s shape) lastEpoch() int32 { return int32((s.perPartition - 1) / epochEvery) }

// mix is splitmix64: deterministic ids that are spread like random ones.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := range len(s) {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return h
}

// uuidOf makes a version-4-shaped UUID from two words.
func uuidOf(a, b uint64) uuid.UUID {
	var u uuid.UUID
	binary.BigEndian.PutUint64(u[:8], mix(a))
	binary.BigEndian.PutUint64(u[8:], mix(b^0x5bd1e995))
	u[6] = (u[6] & 0x0f) | 0x40
	u[8] = (u[8] & 0x3f) | 0x80
	return u
}

func (s shape) topic(p int) (uuid.UUID, string) {
	t := p / s.partitionsPerTopic
	return uuidOf(hashString(s.name), uint64(t)), fmt.Sprintf("%s-%05d", s.name, t)
}

func (s shape) tp(p int) rs.TopicIDPartition {
	id, name := s.topic(p)
	return rs.TopicIDPartition{TopicID: id, Topic: name, Partition: int32(p % s.partitionsPerTopic)}
}

func (s shape) segmentID(p, j int) uuid.UUID {
	return uuidOf(hashString(s.name)+uint64(p)<<20, uint64(j))
}

func segmentStart(j int) int64 { return int64(j) * stride }
func segmentEnd(j int) int64   { return int64(j)*stride + segmentLen - 1 }

// epochRanges returns the epochs of segment j with the first and last offset
// of each.
func epochRanges(j int) (epochs []int32, firsts, lasts []int64) {
	start, end := segmentStart(j), segmentEnd(j)
	e := int32(j / epochEvery)
	if j%epochEvery == 0 && j > 0 {
		mid := start + segmentLen/2
		return []int32{e - 1, e}, []int64{start, mid}, []int64{mid - 1, end}
	}
	return []int32{e}, []int64{start}, []int64{end}
}

// epochAt is the epoch whose range in segment j holds offset.
func epochAt(j int, offset int64) int32 {
	epochs, firsts, _ := epochRanges(j)
	for i := len(epochs) - 1; i >= 0; i-- {
		if offset >= firsts[i] {
			return epochs[i]
		}
	}
	return epochs[0]
}

// segmentMetadata is segment j of partition p as the public type.
func (s shape) segmentMetadata(p, j int) rs.RemoteLogSegmentMetadata {
	epochs, firsts, _ := epochRanges(j)
	m := make(map[rs.LeaderEpoch]int64, len(epochs))
	for i, e := range epochs {
		m[rs.LeaderEpoch(e)] = firsts[i]
	}
	return rs.RemoteLogSegmentMetadata{
		SegmentID:           rs.RemoteLogSegmentID{TopicIDPartition: s.tp(p), ID: s.segmentID(p, j)},
		StartOffset:         segmentStart(j),
		EndOffset:           segmentEnd(j),
		MaxTimestampMs:      baseTimestampMs + int64(j)*1000,
		BrokerID:            int32(p % 6),
		EventTimestampMs:    baseTimestampMs + int64(j)*1000 + 500,
		SegmentSizeInBytes:  segmentSizeBytes,
		CustomMetadata:      customMetadata(p, j),
		State:               rs.CopySegmentStarted,
		SegmentLeaderEpochs: m,
		TxnIndexEmpty:       j%50 != 7,
	}
}

const (
	baseTimestampMs  = 1_750_000_000_000
	segmentSizeBytes = 512 << 20
)

func customMetadata(p, j int) []byte {
	b := make([]byte, customMetadataLen)
	binary.BigEndian.PutUint64(b, mix(uint64(p)<<32|uint64(j)))
	copy(b[8:], "rsm:bucket/object/metadata")
	return b
}
