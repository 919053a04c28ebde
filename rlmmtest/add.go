package rlmmtest

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
)

// addCase is one rule of API.md "Add" broken once.
type addCase struct {
	name string
	// bad returns the segment to add, built from the valid base; it may first
	// set the stage (add the same id elsewhere, mark the partition).
	bad func(e *env, base rs.RemoteLogSegmentMetadata) rs.RemoteLogSegmentMetadata
	// mentions are substrings the error message must contain.
	mentions []string
	// idTaken: the refusal is about the id, so the id stays taken.
	idTaken bool
}

func mutate(f func(m *rs.RemoteLogSegmentMetadata)) func(*env, rs.RemoteLogSegmentMetadata) rs.RemoteLogSegmentMetadata {
	return func(_ *env, base rs.RemoteLogSegmentMetadata) rs.RemoteLogSegmentMetadata {
		m := cloneSegment(base)
		f(&m)
		return m
	}
}

func withTopic(name string) func(*env, rs.RemoteLogSegmentMetadata) rs.RemoteLogSegmentMetadata {
	return mutate(func(m *rs.RemoteLogSegmentMetadata) { m.SegmentID.TopicIDPartition.Topic = name })
}

func withEpochs(epochs map[rs.LeaderEpoch]int64) func(*env, rs.RemoteLogSegmentMetadata) rs.RemoteLogSegmentMetadata {
	return mutate(func(m *rs.RemoteLogSegmentMetadata) { m.SegmentLeaderEpochs = epochs })
}

func withState(st rs.RemoteLogSegmentState) func(*env, rs.RemoteLogSegmentMetadata) rs.RemoteLogSegmentMetadata {
	return mutate(func(m *rs.RemoteLogSegmentMetadata) { m.State = st })
}

// takenElsewhere adds base's id under tp (derived from base's) first.
func takenElsewhere(where func(e *env, tp rs.TopicIDPartition) rs.TopicIDPartition, then func(e *env, s *rs.RemoteLogSegmentMetadata)) func(*env, rs.RemoteLogSegmentMetadata) rs.RemoteLogSegmentMetadata {
	return func(e *env, base rs.RemoteLogSegmentMetadata) rs.RemoteLogSegmentMetadata {
		first := cloneSegment(base)
		first.SegmentID.TopicIDPartition = where(e, base.SegmentID.TopicIDPartition)
		e.add(first)
		if then != nil {
			then(e, &first)
		}
		return base
	}
}

func markedAs(states ...rs.RemotePartitionDeleteState) func(*env, rs.RemoteLogSegmentMetadata) rs.RemoteLogSegmentMetadata {
	return func(e *env, base rs.RemoteLogSegmentMetadata) rs.RemoteLogSegmentMetadata {
		e.mustPutDelete(base.SegmentID.TopicIDPartition, states...)
		return base
	}
}

func addCases() []addCase {
	same := func(_ *env, tp rs.TopicIDPartition) rs.TopicIDPartition { return tp }
	return []addCase{
		{name: "state_COPY_SEGMENT_FINISHED", bad: withState(rs.CopySegmentFinished)},
		{name: "state_DELETE_SEGMENT_STARTED", bad: withState(rs.DeleteSegmentStarted)},
		{name: "state_DELETE_SEGMENT_FINISHED", bad: withState(rs.DeleteSegmentFinished)},
		{name: "state_INVALID_7", bad: withState(7)},
		{name: "id_taken_same_partition", idTaken: true, bad: takenElsewhere(same, nil)},
		{name: "id_taken_same_partition_other_fields", idTaken: true, bad: func(e *env, base rs.RemoteLogSegmentMetadata) rs.RemoteLogSegmentMetadata {
			e.add(base)
			m := cloneSegment(base)
			m.StartOffset, m.EndOffset, m.SegmentLeaderEpochs = 300, 399, map[rs.LeaderEpoch]int64{3: 300}
			return m
		}},
		{name: "id_taken_after_forgotten", idTaken: true, bad: takenElsewhere(same, func(e *env, s *rs.RemoteLogSegmentMetadata) {
			e.reach(s, rs.DeleteSegmentFinished)
		})},
		{name: "id_taken_in_other_partition", idTaken: true, bad: takenElsewhere(func(_ *env, tp rs.TopicIDPartition) rs.TopicIDPartition {
			return withPartition(tp, 1)
		}, nil)},
		{name: "id_taken_in_other_topic", idTaken: true, bad: takenElsewhere(func(e *env, _ rs.TopicIDPartition) rs.TopicIDPartition {
			return e.newTP()
		}, nil)},
		{name: "id_taken_in_deleted_partition", idTaken: true, bad: takenElsewhere(func(_ *env, tp rs.TopicIDPartition) rs.TopicIDPartition {
			return withPartition(tp, 2)
		}, func(e *env, s *rs.RemoteLogSegmentMetadata) {
			e.mustPutDelete(s.SegmentID.TopicIDPartition, rs.DeletePartitionMarked, rs.DeletePartitionStarted, rs.DeletePartitionFinished)
		})},
		{name: "zero_topic_id", bad: mutate(func(m *rs.RemoteLogSegmentMetadata) { m.SegmentID.TopicIDPartition.TopicID = uuid.Nil })},
		{name: "zero_segment_id", bad: mutate(func(m *rs.RemoteLogSegmentMetadata) { m.SegmentID.ID = uuid.Nil })},
		{name: "topic_empty", bad: withTopic("")},
		{name: "topic_250_chars", bad: withTopic(strings.Repeat("a", 250))},
		{name: "topic_dot", bad: withTopic(".")},
		{name: "topic_dotdot", bad: withTopic("..")},
		{name: "topic_illegal_slash", bad: withTopic("orders/eu")},
		{name: "topic_illegal_space", bad: withTopic("orders eu")},
		{name: "topic_illegal_non_ascii", bad: withTopic("commandé")},
		{name: "partition_negative", mentions: []string{"-7"}, bad: mutate(func(m *rs.RemoteLogSegmentMetadata) { m.SegmentID.TopicIDPartition.Partition = -7 })},
		{name: "start_offset_negative", mentions: []string{"-42"}, bad: mutate(func(m *rs.RemoteLogSegmentMetadata) {
			m.StartOffset = -42
			m.SegmentLeaderEpochs = map[rs.LeaderEpoch]int64{3: -42}
		})},
		{name: "end_before_start", mentions: []string{"8999"}, bad: mutate(func(m *rs.RemoteLogSegmentMetadata) {
			m.StartOffset, m.EndOffset = 9000, 8999
			m.SegmentLeaderEpochs = map[rs.LeaderEpoch]int64{3: 9000}
		})},
		{name: "epochs_nil", bad: withEpochs(nil)},
		{name: "epochs_empty", bad: withEpochs(map[rs.LeaderEpoch]int64{})},
		{name: "epoch_negative", mentions: []string{"-13"}, bad: withEpochs(map[rs.LeaderEpoch]int64{-13: 100, 4: 150})},
		{name: "epoch_start_before_start_offset", mentions: []string{"57"}, bad: withEpochs(map[rs.LeaderEpoch]int64{3: 57, 4: 150})},
		{name: "epoch_start_after_end_offset", mentions: []string{"263"}, bad: withEpochs(map[rs.LeaderEpoch]int64{3: 100, 4: 263})},
		{name: "epoch_start_just_after_end_offset", bad: withEpochs(map[rs.LeaderEpoch]int64{3: 100, 4: 200})},
		{name: "epoch_starts_equal", bad: withEpochs(map[rs.LeaderEpoch]int64{3: 100, 4: 150, 5: 150})},
		{name: "epoch_starts_decreasing", bad: withEpochs(map[rs.LeaderEpoch]int64{3: 150, 4: 120})},
		{name: "size_negative", mentions: []string{"-777"}, bad: mutate(func(m *rs.RemoteLogSegmentMetadata) { m.SegmentSizeInBytes = -777 })},
		{name: "custom_metadata_over_limit", bad: mutate(func(m *rs.RemoteLogSegmentMetadata) {
			m.CustomMetadata = bytes.Repeat([]byte{'m'}, CustomMetadataLimit+1)
		})},
		{name: "partition_DELETE_PARTITION_MARKED", bad: markedAs(rs.DeletePartitionMarked)},
		{name: "partition_DELETE_PARTITION_STARTED", bad: markedAs(rs.DeletePartitionMarked, rs.DeletePartitionStarted)},
		{name: "partition_DELETE_PARTITION_FINISHED", bad: markedAs(rs.DeletePartitionMarked, rs.DeletePartitionStarted, rs.DeletePartitionFinished)},
	}
}

// validTP reports whether tp could be listed (a query about an illegal
// partition is not the point of these tests).
func validTP(tp rs.TopicIDPartition) bool {
	return tp.TopicID != uuid.Nil && legalTopic(tp.Topic) && tp.Partition >= 0
}

func (s *suite) add(t *testing.T) {
	for _, c := range addCases() {
		s.run(t, c.name, func(e *env) {
			tp := e.newTP()
			e.addFinished(tp, 1000, 1099, nil) // something the refused add must leave alone
			base := e.segment(tp, 100, 199, map[rs.LeaderEpoch]int64{3: 100, 4: 150})
			bad := c.bad(e, base)

			watched := []rs.TopicIDPartition{tp}
			if badTP := bad.SegmentID.TopicIDPartition; badTP != tp && validTP(badTP) {
				watched = append(watched, badTP)
			}
			before := map[rs.TopicIDPartition][]rs.RemoteLogSegmentMetadata{}
			for _, w := range watched {
				before[w] = e.list(w)
			}

			err := e.m.AddRemoteLogSegmentMetadata(e.ctx, bad)
			requireSentinel(e.t, err, rs.ErrInvalidAdd)
			for _, m := range c.mentions {
				require.Contains(e.t, err.Error(), m, "the error names the offending value")
			}
			for _, w := range watched {
				requireSameSegments(e.t, before[w], e.list(w), "a refused add stores nothing (%s)", w)
			}
			if c.idTaken {
				return
			}
			// Nothing stored, not even the id: the valid segment with that id
			// is accepted elsewhere.
			fresh := cloneSegment(base)
			fresh.SegmentID.TopicIDPartition = e.newTP()
			fresh.SegmentID.ID = bad.SegmentID.ID
			if fresh.SegmentID.ID == uuid.Nil {
				fresh.SegmentID.ID = base.SegmentID.ID
			}
			e.add(fresh)
			e.requireList(fresh.SegmentID.TopicIDPartition, fresh)
		})
	}

	// Valid edge cases: each add succeeds and reads back as given.
	valid := []struct {
		name string
		f    func(m *rs.RemoteLogSegmentMetadata)
	}{
		{"valid_single_offset", func(m *rs.RemoteLogSegmentMetadata) {
			m.StartOffset, m.EndOffset, m.SegmentLeaderEpochs = 5, 5, map[rs.LeaderEpoch]int64{0: 5}
		}},
		{"valid_offset_zero_epoch_zero", func(m *rs.RemoteLogSegmentMetadata) {
			m.StartOffset, m.EndOffset, m.SegmentLeaderEpochs = 0, 0, map[rs.LeaderEpoch]int64{0: 0}
		}},
		{"valid_epoch_starts_at_end_offset", func(m *rs.RemoteLogSegmentMetadata) {
			m.SegmentLeaderEpochs = map[rs.LeaderEpoch]int64{3: 100, 4: 199}
		}},
		{"valid_first_epoch_after_start_offset", func(m *rs.RemoteLogSegmentMetadata) {
			m.SegmentLeaderEpochs = map[rs.LeaderEpoch]int64{3: 120}
		}},
		{"valid_large_values", func(m *rs.RemoteLogSegmentMetadata) {
			m.StartOffset, m.EndOffset = 1<<40, 1<<50
			m.SegmentLeaderEpochs = map[rs.LeaderEpoch]int64{1<<31 - 2: 1 << 40, 1<<31 - 1: 1 << 45}
			m.SegmentSizeInBytes = 1<<31 - 1
			m.MaxTimestampMs, m.EventTimestampMs, m.BrokerID = 1<<62, -5, 1<<31-1
		}},
		{"valid_topic_249_chars", func(m *rs.RemoteLogSegmentMetadata) {
			m.SegmentID.TopicIDPartition.Topic = strings.Repeat("aZ09._-", 35) + "abcd"
		}},
		{"valid_topic_dots", func(m *rs.RemoteLogSegmentMetadata) { m.SegmentID.TopicIDPartition.Topic = "..." }},
		{"valid_custom_metadata_at_limit", func(m *rs.RemoteLogSegmentMetadata) {
			m.CustomMetadata = bytes.Repeat([]byte{0xff}, CustomMetadataLimit)
		}},
		{"valid_custom_metadata_nil", func(m *rs.RemoteLogSegmentMetadata) { m.CustomMetadata = nil }},
		{"valid_size_zero", func(m *rs.RemoteLogSegmentMetadata) { m.SegmentSizeInBytes = 0 }},
		{"valid_txn_index", func(m *rs.RemoteLogSegmentMetadata) { m.TxnIndexEmpty = false }},
		{"valid_partition_large", func(m *rs.RemoteLogSegmentMetadata) { m.SegmentID.TopicIDPartition.Partition = 1<<31 - 1 }},
	}
	for _, c := range valid {
		s.run(t, c.name, func(e *env) {
			m := e.segment(e.newTP(), 100, 199, map[rs.LeaderEpoch]int64{3: 100, 4: 150})
			c.f(&m)
			e.add(m)
			tp := m.SegmentID.TopicIDPartition
			e.requireList(tp, m)
			e.to(&m, rs.CopySegmentFinished)
			e.requireList(tp, m)
			for ep, start := range m.SegmentLeaderEpochs {
				e.requireLookup(tp, ep, start, &m)
				e.requireListByEpoch(tp, ep, m)
			}
		})
	}
}
