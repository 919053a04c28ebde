package migrationdata

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	rs "github.com/krabka/remotestorage"
)

// Answer is one call and what the manager answered, as text: two managers
// hold the same data when their answers are equal, probe by probe.
type Answer struct {
	Probe string `json:"probe"`
	Got   string `json:"got"`
}

// Result is what the driver prints: the outcome of each step of the
// workload, then the answers of the probes.
type Result struct {
	Outcomes []Answer `json:"outcomes"`
	Answers  []Answer `json:"answers"`
}

// sentinels are the public errors an answer names; an error matching none
// of them is an answer of its own ("unexpected error: ...").
var sentinels = []struct {
	name string
	err  error
}{
	{"ErrInvalidAdd", rs.ErrInvalidAdd},
	{"ErrSegmentNotFound", rs.ErrSegmentNotFound},
	{"ErrInvalidSegmentTransition", rs.ErrInvalidSegmentTransition},
	{"ErrInvalidPartitionDeleteTransition", rs.ErrInvalidPartitionDeleteTransition},
	{"ErrNotReady", rs.ErrNotReady},
	{"ErrIO", rs.ErrIO},
	{"ErrSchemaMismatch", rs.ErrSchemaMismatch},
}

// errName names err by the sentinel it matches (errors.Is), never by its
// message, which differs between versions of the code.
func errName(err error) string {
	if err == nil {
		return "ok"
	}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	return "unexpected error: " + err.Error()
}

// Apply runs the workload's steps on m, in order, and returns the outcome of
// each: "ok" or the sentinel its error matches.
func Apply(ctx context.Context, m rs.Manager, w Workload) []Answer {
	out := make([]Answer, 0, len(w.Steps))
	for i, s := range w.Steps {
		var (
			err  error
			call string
		)
		switch {
		case s.Add != nil:
			err = m.AddRemoteLogSegmentMetadata(ctx, *s.Add)
			call = fmt.Sprintf("add %s [%d, %d]", s.Add.SegmentID.ID, s.Add.StartOffset, s.Add.EndOffset)
		case s.Update != nil:
			err = m.UpdateRemoteLogSegmentMetadata(ctx, *s.Update)
			call = fmt.Sprintf("update %s to %s", s.Update.SegmentID.ID, s.Update.State)
		case s.PartitionDelete != nil:
			err = m.PutRemotePartitionDeleteMetadata(ctx, *s.PartitionDelete)
			call = fmt.Sprintf("partition delete to %s", s.PartitionDelete.State)
		}
		out = append(out, Answer{Probe: fmt.Sprintf("step %d, %s: %s", i, s.What, call), Got: errName(err)})
	}
	return out
}

// answer writes the result of a call that may find nothing: the sentinel
// its error matches, "none", or what it found.
func answer[T any](v T, found bool, err error, show func(T) string) string {
	switch {
	case err != nil:
		return errName(err)
	case !found:
		return "none"
	}
	return show(v)
}

func formatOffset(o int64) string { return strconv.FormatInt(o, 10) }

// render is a segment as an answer: every field the API returns.
func render(s rs.RemoteLogSegmentMetadata) string {
	var epochs []string
	for _, e := range epochsOf(s) {
		epochs = append(epochs, fmt.Sprintf("%d:%d", e, s.SegmentLeaderEpochs[e]))
	}
	custom := "none"
	if s.CustomMetadata != nil {
		custom = fmt.Sprintf("%x", s.CustomMetadata)
		if len(s.CustomMetadata) == 0 {
			custom = "empty"
		}
	}
	return fmt.Sprintf("%s %s-%d (%s) [%d, %d] %s epochs %s max_ts %d broker %d event_ts %d size %d txn_index_empty %t custom %s",
		s.SegmentID.ID, s.SegmentID.TopicIDPartition.Topic, s.SegmentID.TopicIDPartition.Partition, s.SegmentID.TopicIDPartition.TopicID,
		s.StartOffset, s.EndOffset, s.State, strings.Join(epochs, ","), s.MaxTimestampMs, s.BrokerID, s.EventTimestampMs,
		s.SegmentSizeInBytes, s.TxnIndexEmpty, custom)
}

// Answers asks m a fixed set of questions about every partition of w, and
// returns the answers in a fixed order. For each partition: the list; then
// for each epoch from 0 to one past the largest that an add named
// (skipped epoch numbers and the one past the end have no segment): the
// list by epoch, RemoteLogSize, HighestOffsetForEpoch, EpochEndOffset, and
// at offsets at, inside, between and beyond the epoch's ranges in the added
// segments, RemoteLogSegmentMetadata and NextSegmentWithTxnIndex; and
// FirstSegmentForTimestamp at timestamps below, inside and above the
// segments' and from a few starting offsets. Every probe depends on w
// only, never on m's answers, so two managers are asked the same questions.
func Answers(ctx context.Context, m rs.Manager, w Workload) []Answer {
	var out []Answer
	rec := func(got string, probe string, args ...any) {
		out = append(out, Answer{Probe: fmt.Sprintf(probe, args...), Got: got})
	}
	recList := func(list []rs.RemoteLogSegmentMetadata, err error, probe string) {
		if err != nil {
			rec(errName(err), "%s", probe)
			return
		}
		rec(strconv.Itoa(len(list)), "%s: count", probe)
		for i, s := range list {
			rec(render(s), "%s: [%d]", probe, i)
		}
	}
	for _, tp := range w.Partitions {
		name := fmt.Sprintf("%s-%d", tp.Topic, tp.Partition)
		var (
			segs       []rs.RemoteLogSegmentMetadata
			maxEpoch   = rs.LeaderEpoch(-1)
			maxEnd     int64
			timestamps []int64
		)
		for _, s := range w.Steps {
			if s.Add == nil || s.Add.SegmentID.TopicIDPartition.TopicID != tp.TopicID || s.Add.SegmentID.TopicIDPartition.Partition != tp.Partition || s.Add.EndOffset < s.Add.StartOffset {
				continue
			}
			segs = append(segs, *s.Add)
			for e := range s.Add.SegmentLeaderEpochs {
				maxEpoch = max(maxEpoch, e)
			}
			maxEnd = max(maxEnd, s.Add.EndOffset)
			timestamps = append(timestamps, s.Add.MaxTimestampMs)
		}
		slices.Sort(timestamps)

		list, err := m.ListRemoteLogSegments(ctx, tp)
		recList(list, err, "list "+name)
		for e := range maxEpoch + 2 {
			probe := fmt.Sprintf("%s epoch %d", name, e)
			list, err := m.ListRemoteLogSegmentsByEpoch(ctx, tp, e)
			recList(list, err, "list by epoch "+probe)
			size, err := m.RemoteLogSize(ctx, tp, e)
			if err != nil {
				rec(errName(err), "size %s", probe)
			} else {
				rec(strconv.FormatInt(size, 10), "size %s", probe)
			}
			o, found, err := m.HighestOffsetForEpoch(ctx, tp, e)
			rec(answer(o, found, err, formatOffset), "highest offset %s", probe)
			o, found, err = m.EpochEndOffset(ctx, tp, e)
			rec(answer(o, found, err, formatOffset), "epoch end offset %s", probe)

			offsets := []int64{0, maxEnd + 100}
			for _, s := range segs {
				first, last, ok := epochRange(s, e)
				if !ok {
					continue
				}
				offsets = append(offsets, first-1, first, (first+last)/2, last, last+1)
			}
			slices.Sort(offsets)
			for _, o := range slices.Compact(offsets) {
				if o < 0 {
					continue
				}
				s, found, err := m.RemoteLogSegmentMetadata(ctx, tp, e, o)
				rec(answer(s, found, err, render), "lookup %s offset %d", probe, o)
				s, found, err = m.NextSegmentWithTxnIndex(ctx, tp, e, o)
				rec(answer(s, found, err, render), "next txn index %s offset %d", probe, o)
			}

			var stamps []int64
			if len(timestamps) > 0 {
				stamps = []int64{timestamps[0] - 1, timestamps[len(timestamps)/2], timestamps[len(timestamps)-1] + 1}
			}
			for _, ts := range stamps {
				for _, from := range []int64{0, maxEnd / 2} {
					s, found, err := m.FirstSegmentForTimestamp(ctx, tp, e, ts, from)
					rec(answer(s, found, err, render), "first for timestamp %s timestamp %d from offset %d", probe, ts, from)
				}
			}
		}
	}
	return out
}

// epochRange is the range of epoch e in s: from its start offset to the
// next epoch's start - 1, or to EndOffset for the last.
func epochRange(s rs.RemoteLogSegmentMetadata, e rs.LeaderEpoch) (first, last int64, ok bool) {
	first, ok = s.SegmentLeaderEpochs[e]
	if !ok {
		return 0, 0, false
	}
	last = s.EndOffset
	for other, start := range s.SegmentLeaderEpochs {
		if other > e && start-1 < last {
			last = start - 1
		}
	}
	return first, last, true
}
