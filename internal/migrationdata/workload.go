// Package migrationdata is the data the migration data test writes with the
// code of an older schema and reads back after migrating: a deterministic
// workload built from a seed (Generate), the calls that write it (Apply),
// and a fixed set of probes over it (Answers), whose answers the test
// compares between the older code, the current code and the model.
//
// Its files are also built inside a copy of an older commit of this module
// (with the driver in package driver below), so it uses only the public API
// that the code of schema 7 already had: the calls of remotestorage.Manager,
// its types and its sentinel errors.
package migrationdata

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/google/uuid"

	rs "github.com/krabka/remotestorage"
)

// Step is one call of the workload: exactly one of Add, Update and
// PartitionDelete is set.
type Step struct {
	What            string // what the step does, for its outcome
	Add             *rs.RemoteLogSegmentMetadata
	Update          *rs.RemoteLogSegmentMetadataUpdate
	PartitionDelete *rs.RemotePartitionDeleteMetadata
}

// Workload is the calls Generate builds from a seed, and the partitions the
// probes read: every partition the calls name, and one they never write.
type Workload struct {
	Seed       uint64
	Partitions []rs.TopicIDPartition
	Steps      []Step
}

// partitionPlan is what one partition goes through.
type partitionPlan int

const (
	planLive             partitionPlan = iota // segments only
	planDeleteMarked                          // ends in DELETE_PARTITION_MARKED
	planDeleteStarted                         // ends in DELETE_PARTITION_STARTED
	planDeleteFinished                        // ends in DELETE_PARTITION_FINISHED
	planMarkedNoSegments                      // a delete record and no segment
)

// generator builds the workload; its random source is the only input.
type generator struct {
	rnd     *rand.Rand
	tsBase  int64
	eventTs int64
}

func (g *generator) uuid() uuid.UUID {
	var u uuid.UUID
	for i := range u {
		u[i] = byte(g.rnd.Uint32())
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

// event is the next event timestamp: increasing, as a broker's clock.
func (g *generator) event() int64 {
	g.eventTs += 1 + int64(g.rnd.IntN(1000))
	return g.eventTs
}

// segState is a segment as the generator tracks it.
type segState struct {
	md    rs.RemoteLogSegmentMetadata
	state rs.RemoteLogSegmentState
}

// Generate builds the workload of seed: eight partitions of four topics,
// each with a history of 40 to 70 segments over several leader epochs (some
// segments carry one epoch, some two or three, and epoch numbers skip),
// unclean leader elections (a segment of a new epoch starting below the
// previous end, over segments already finished), segments left in each of
// the four states, retention deleting the oldest, custom metadata set on
// add and replaced on update, transaction indexes present and absent, and
// partitions whose deletion is marked, started or finished. Among the calls
// are some the API refuses; their errors are part of the outcome. The steps
// of the partitions are interleaved, each partition's in its own order.
func Generate(seed uint64) Workload {
	g := &generator{rnd: rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d)), tsBase: 1_700_000_000_000, eventTs: 1_700_000_000_000}
	type part struct {
		tp   rs.TopicIDPartition
		plan partitionPlan
	}
	var parts []part
	for _, topic := range []struct {
		name  string
		plans []partitionPlan
	}{
		{"orders", []partitionPlan{planLive, planLive, planLive}},
		{"payments", []partitionPlan{planDeleteMarked, planDeleteStarted}},
		{"audit", []partitionPlan{planDeleteFinished, planLive}},
		{"clicks", []partitionPlan{planMarkedNoSegments}},
	} {
		id := g.uuid()
		for i, plan := range topic.plans {
			parts = append(parts, part{rs.TopicIDPartition{TopicID: id, Topic: topic.name, Partition: int32(i)}, plan})
		}
	}
	w := Workload{Seed: seed}
	var lanes [][]Step
	var taken rs.RemoteLogSegmentID // a segment of another partition, for an update under the wrong partition
	for _, p := range parts {
		w.Partitions = append(w.Partitions, p.tp)
		steps, first := g.partition(p.tp, p.plan, taken)
		if first.ID != uuid.Nil {
			taken = first
		}
		lanes = append(lanes, steps)
	}
	w.Partitions = append(w.Partitions, rs.TopicIDPartition{TopicID: g.uuid(), Topic: "never-written", Partition: 0})
	// Interleave the partitions' steps, keeping each partition's order.
	for {
		var open []int
		for i, l := range lanes {
			if len(l) > 0 {
				open = append(open, i)
			}
		}
		if len(open) == 0 {
			break
		}
		i := open[g.rnd.IntN(len(open))]
		n := 1 + g.rnd.IntN(4)
		n = min(n, len(lanes[i]))
		w.Steps = append(w.Steps, lanes[i][:n]...)
		lanes[i] = lanes[i][n:]
	}
	return w
}

// partition builds the steps of one partition; elsewhere is a segment of
// another partition (zero for the first), and first is this partition's
// first segment.
func (g *generator) partition(tp rs.TopicIDPartition, plan partitionPlan, elsewhere rs.RemoteLogSegmentID) (steps []Step, first rs.RemoteLogSegmentID) {
	name := fmt.Sprintf("%s-%d", tp.Topic, tp.Partition)
	add := func(what string, md rs.RemoteLogSegmentMetadata) {
		md2 := md
		steps = append(steps, Step{What: name + ": " + what, Add: &md2})
	}
	update := func(what string, s *segState, to rs.RemoteLogSegmentState, custom []byte) {
		u := rs.RemoteLogSegmentMetadataUpdate{SegmentID: s.md.SegmentID, EventTimestampMs: g.event(), CustomMetadata: custom, State: to, BrokerID: int32(g.rnd.IntN(3))}
		steps = append(steps, Step{What: name + ": " + what, Update: &u})
	}
	partitionDelete := func(what string, to rs.RemotePartitionDeleteState) {
		d := rs.RemotePartitionDeleteMetadata{TopicIDPartition: tp, State: to, EventTimestampMs: g.event(), BrokerID: int32(g.rnd.IntN(3))}
		steps = append(steps, Step{What: name + ": " + what, PartitionDelete: &d})
	}
	// can moves s to state to when the lifecycle allows it, as the store
	// will; the workload's legal calls are planned with it.
	can := func(s *segState, to rs.RemoteLogSegmentState) bool {
		switch to {
		case rs.CopySegmentFinished:
			return s.state == rs.CopySegmentStarted || s.state == rs.CopySegmentFinished
		case rs.DeleteSegmentStarted:
			return s.state != rs.DeleteSegmentFinished
		case rs.DeleteSegmentFinished:
			return s.state == rs.DeleteSegmentStarted || s.state == rs.DeleteSegmentFinished
		}
		return false
	}
	move := func(what string, s *segState, to rs.RemoteLogSegmentState, custom []byte) {
		update(what, s, to, custom)
		if can(s, to) {
			s.state = to
		}
	}

	if plan == planMarkedNoSegments {
		partitionDelete("a partition delete started before it was marked (refused)", rs.DeletePartitionStarted)
		partitionDelete("marked for deletion, no segment ever added", rs.DeletePartitionMarked)
		partitionDelete("marked again (a retry)", rs.DeletePartitionMarked)
		return steps, first
	}

	var segs []*segState
	cursor := int64(g.rnd.IntN(1000))
	epoch := rs.LeaderEpoch(g.rnd.IntN(3))
	n := 40 + g.rnd.IntN(31)
	for i := range n {
		what := "add"
		switch {
		case i > 3 && g.rnd.IntN(10) == 0:
			// An unclean leader election: the new leader's log is shorter,
			// and its segments cover offsets already copied.
			epoch++
			cursor = max(0, cursor-int64(1+g.rnd.IntN(150)))
			what = "add after an unclean election"
		case g.rnd.IntN(6) == 0:
			epoch += 1 + rs.LeaderEpoch(g.rnd.IntN(2)) // a skipped epoch number now and then
			what = "add in a new epoch"
		}
		length := int64(1 + g.rnd.IntN(120))
		start, end := cursor, cursor+length-1
		epochs := map[rs.LeaderEpoch]int64{epoch: start}
		if length >= 4 && g.rnd.IntN(5) == 0 {
			// Leadership moved inside the segment: one or two more epochs.
			pos := start
			for range 1 + g.rnd.IntN(2) {
				if pos >= end {
					break
				}
				pos += 1 + g.rnd.Int64N(end-pos)
				epoch += 1 + rs.LeaderEpoch(g.rnd.IntN(2))
				epochs[epoch] = pos
			}
			what += " carrying several epochs"
		}
		cursor = end + 1
		var custom []byte
		if g.rnd.IntN(4) == 0 {
			custom = []byte{byte(g.rnd.IntN(256)), byte(i), 0, 0xff}
		}
		s := &segState{state: rs.CopySegmentStarted, md: rs.RemoteLogSegmentMetadata{
			SegmentID:           rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: g.uuid()},
			StartOffset:         start,
			EndOffset:           end,
			MaxTimestampMs:      g.tsBase + end*10 + int64(g.rnd.IntN(50)),
			BrokerID:            int32(g.rnd.IntN(3)),
			EventTimestampMs:    g.event(),
			SegmentSizeInBytes:  int32(length*100 + int64(g.rnd.IntN(100))),
			CustomMetadata:      custom,
			State:               rs.CopySegmentStarted,
			SegmentLeaderEpochs: epochs,
			TxnIndexEmpty:       g.rnd.IntN(3) != 0,
		}}
		if i == 0 {
			first = s.md.SegmentID
		}
		segs = append(segs, s)
		add(what, s.md)
		switch g.rnd.IntN(20) {
		case 0:
			// The upload is still running: left in COPY_SEGMENT_STARTED.
		case 1:
			move("upload failed, delete started", s, rs.DeleteSegmentStarted, nil)
			if g.rnd.IntN(2) == 0 {
				move("upload failed, delete finished", s, rs.DeleteSegmentFinished, nil)
			}
		default:
			move("finish", s, rs.CopySegmentFinished, nil)
			if g.rnd.IntN(8) == 0 {
				move("finish again with new custom metadata", s, rs.CopySegmentFinished, []byte{0xca, 0xfe, byte(i)})
			}
		}
		// Calls the API refuses, now and then.
		switch g.rnd.IntN(25) {
		case 0:
			dup := s.md
			add("the same segment id added again (refused)", dup)
		case 1:
			bad := s.md
			bad.SegmentID.ID = g.uuid()
			bad.EndOffset = bad.StartOffset - 1
			add("an add ending before its start (refused)", bad)
		case 2:
			bad := s.md
			bad.SegmentID.ID = g.uuid()
			bad.State = rs.CopySegmentFinished
			add("an add in COPY_SEGMENT_FINISHED (refused)", bad)
		case 3:
			update("an update to COPY_SEGMENT_STARTED (refused)", s, rs.CopySegmentStarted, nil)
		case 4:
			bad := *s
			bad.md.SegmentID.ID = g.uuid()
			update("an update of a segment never added (refused)", &bad, rs.CopySegmentFinished, nil)
		case 5:
			move("an update to DELETE_SEGMENT_FINISHED (refused unless its delete started)", s, rs.DeleteSegmentFinished, nil)
		case 6:
			bad := s.md
			bad.SegmentID.ID = g.uuid()
			bad.CustomMetadata = make([]byte, rs.DefaultMaxCustomMetadataBytes+1)
			add("an add with custom metadata over the limit (refused)", bad)
		case 7:
			if elsewhere.ID != uuid.Nil {
				bad := segState{md: rs.RemoteLogSegmentMetadata{SegmentID: rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: elsewhere.ID}}}
				update("an update of another partition's segment under this partition (refused)", &bad, rs.CopySegmentFinished, nil)
			}
		}
	}

	// Retention: the oldest segments are deleted, the last of them left in
	// DELETE_SEGMENT_STARTED; a deleted segment cannot be finished again.
	retained := g.rnd.IntN(len(segs) / 4)
	for i, s := range segs[:retained] {
		if !can(s, rs.DeleteSegmentStarted) {
			continue
		}
		move("retention: delete started", s, rs.DeleteSegmentStarted, nil)
		if i < retained-1 {
			move("retention: delete finished", s, rs.DeleteSegmentFinished, nil)
		}
	}
	if retained > 1 && segs[0].state == rs.DeleteSegmentFinished {
		move("finish a forgotten segment (refused)", segs[0], rs.CopySegmentFinished, nil)
	}

	switch plan {
	case planDeleteMarked, planDeleteStarted, planDeleteFinished:
		partitionDelete("a partition delete finished before it was marked (refused)", rs.DeletePartitionFinished)
		partitionDelete("marked for deletion", rs.DeletePartitionMarked)
		late := *segs[len(segs)-1]
		late.md.SegmentID.ID = g.uuid()
		late.md.StartOffset, late.md.EndOffset = cursor, cursor+10
		late.md.SegmentLeaderEpochs = map[rs.LeaderEpoch]int64{epoch: cursor}
		add("an add to a partition marked for deletion (refused)", late.md)
		if plan == planDeleteMarked {
			partitionDelete("finished while marked (refused)", rs.DeletePartitionFinished)
			// The deletion has begun on a few segments only.
			for _, s := range segs[len(segs)-3:] {
				if can(s, rs.DeleteSegmentStarted) {
					move("partition deletion: delete started", s, rs.DeleteSegmentStarted, nil)
				}
			}
			break
		}
		partitionDelete("partition delete started", rs.DeletePartitionStarted)
		partitionDelete("marked again after it started (refused)", rs.DeletePartitionMarked)
		for i, s := range segs {
			if !can(s, rs.DeleteSegmentStarted) {
				continue
			}
			move("partition deletion: delete started", s, rs.DeleteSegmentStarted, nil)
			if plan == planDeleteFinished || i%2 == 0 {
				move("partition deletion: delete finished", s, rs.DeleteSegmentFinished, nil)
			}
		}
		if plan == planDeleteFinished {
			partitionDelete("partition delete finished", rs.DeletePartitionFinished)
			partitionDelete("finished again (a retry)", rs.DeletePartitionFinished)
			last := segs[len(segs)-1]
			update("an update of a segment of a deleted partition (refused)", last, rs.DeleteSegmentFinished, nil)
		}
	}
	return steps, first
}

// epochsOf returns md's epochs in increasing order.
func epochsOf(md rs.RemoteLogSegmentMetadata) []rs.LeaderEpoch {
	var out []rs.LeaderEpoch
	for e := range md.SegmentLeaderEpochs {
		out = append(out, e)
	}
	slices.Sort(out)
	return out
}
