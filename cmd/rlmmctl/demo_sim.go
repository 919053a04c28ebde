package main

// demo_sim.go: the demo's simulated cluster: the plan of topics, partitions
// and segments, and the brokers taking each partition through its lifecycle.
// Every write also goes to an in-memory reference manager, which the report
// checks the store's answers against.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/krabka/remotestorage"
)

// The shape of the simulated log.
const (
	offsetsPerSegment = 1000
	// epochChangeAt is where, inside the segment that spans the leadership
	// change, the new epoch starts.
	epochChangeAt = 400
	// controllerBroker writes DELETE_PARTITION_MARKED, as Kafka's
	// controller does.
	controllerBroker = 0
)

// demoTopicNames are the topics' names; more topics get numbered names.
var demoTopicNames = []string{"orders", "payments", "clickstream", "inventory", "shipments", "audit-log"}

// demoSegment is a segment of the simulation, with the state the
// simulation believes it is in.
type demoSegment struct {
	meta  remotestorage.RemoteLogSegmentMetadata
	state remotestorage.RemoteLogSegmentState
}

type demoPartition struct {
	topic    *demoTopic
	index    int
	tp       remotestorage.TopicIDPartition
	leaders  [2]int // the broker leading epoch 0 and epoch 1
	segments []*demoSegment
	change   int  // index of the segment that spans epochs 0 and 1
	retained int  // segments [0, retained) are deleted by retention
	deleted  bool // DELETE_PARTITION_FINISHED reached
}

type demoTopic struct {
	name       string
	id         uuid.UUID
	index      int
	deleted    bool // the topic the demo deletes
	partitions []*demoPartition
}

// demoRun is one run of the simulation.
type demoRun struct {
	o        demoOptions
	managers []*remotestorage.PgManager
	// reference takes the same writes as the store, in the same order per
	// partition: its answers are the ones the store must give.
	reference *remotestorage.InMemoryManager
	topics    []*demoTopic

	writes         atomic.Int64
	partitionsDone atomic.Int64

	mu         sync.Mutex
	refusals   []string
	unexpected []string
}

// plan lays out every topic, partition and segment before anything is
// written, from the seed.
func (d *demoRun) plan() {
	now := time.Now()
	for ti := range d.o.topics {
		name := fmt.Sprintf("demo-topic-%d", ti)
		if ti < len(demoTopicNames) {
			name = "demo-" + demoTopicNames[ti]
		}
		t := &demoTopic{name: name, id: uuid.New(), index: ti, deleted: ti == d.o.topics-1}
		for pi := range d.o.partitions {
			rng := rand.New(rand.NewPCG(d.o.seed, uint64(ti)<<32|uint64(pi)))
			first := (ti*d.o.partitions + pi) % d.o.brokers
			p := &demoPartition{
				topic:    t,
				index:    pi,
				tp:       remotestorage.TopicIDPartition{TopicID: t.id, Topic: name, Partition: int32(pi)},
				leaders:  [2]int{first, (first + 1) % d.o.brokers},
				change:   d.o.segments / 2,
				retained: max(1, d.o.segments/4),
			}
			// The log starts a week ago; each segment covers a slice of it.
			logStart := now.Add(-7 * 24 * time.Hour)
			step := 7 * 24 * time.Hour / time.Duration(d.o.segments)
			for i := range d.o.segments {
				start := int64(i) * offsetsPerSegment
				epochs := map[remotestorage.LeaderEpoch]int64{0: start}
				switch {
				case i == p.change:
					epochs[1] = start + epochChangeAt
				case i > p.change:
					epochs = map[remotestorage.LeaderEpoch]int64{1: start}
				}
				id := uuid.New()
				p.segments = append(p.segments, &demoSegment{meta: remotestorage.RemoteLogSegmentMetadata{
					SegmentID:           remotestorage.RemoteLogSegmentID{TopicIDPartition: p.tp, ID: id},
					StartOffset:         start,
					EndOffset:           start + offsetsPerSegment - 1,
					MaxTimestampMs:      logStart.Add(time.Duration(i+1) * step).UnixMilli(),
					SegmentSizeInBytes:  int32(4<<20 + rng.IntN(60<<20)), // 4-64 MiB
					CustomMetadata:      fmt.Appendf(nil, `{"bucket":"tiered","key":"%s-%d/%s.log"}`, name, pi, id),
					State:               remotestorage.CopySegmentStarted,
					SegmentLeaderEpochs: epochs,
					TxnIndexEmpty:       rng.IntN(5) != 0,
				}})
			}
			t.partitions = append(t.partitions, p)
		}
		d.topics = append(d.topics, t)
	}
}

// deletedTopic is the topic the demo deletes.
func (d *demoRun) deletedTopic() *demoTopic { return d.topics[len(d.topics)-1] }

func (d *demoRun) describe(a *app) {
	out := a.stdout
	s := d.o.segments
	fmt.Fprintf(out, "  brokers 0-%d, each a PgManager over its own connection pool, work on the partitions concurrently\n", d.o.brokers-1)
	fmt.Fprintf(out, "  per partition: %d segments of %d offsets are copied (COPY_SEGMENT_STARTED → COPY_SEGMENT_FINISHED)\n", s, offsetsPerSegment)
	change := s / 2 * offsetsPerSegment
	fmt.Fprintf(out, "  a leadership change at offset %d moves the partition to the next broker, epoch 0 → 1;\n", change+epochChangeAt)
	fmt.Fprintf(out, "    segment %d-%d spans both epochs, later segments carry epoch 1 only\n", change, change+offsetsPerSegment-1)
	fmt.Fprintf(out, "  retention deletes the %d oldest segments (DELETE_SEGMENT_STARTED → DELETE_SEGMENT_FINISHED)\n", max(1, s/4))
	fmt.Fprintf(out, "  partition 0 of each topic keeps its last upload in COPY_SEGMENT_STARTED and one deletion in DELETE_SEGMENT_STARTED\n")
	fmt.Fprintf(out, "  topic %s is deleted: DELETE_PARTITION_MARKED → its segments deleted → DELETE_PARTITION_STARTED → DELETE_PARTITION_FINISHED\n",
		d.deletedTopic().name)
}

// simulate runs every partition's lifecycle, partitions concurrently.
func (d *demoRun) simulate(ctx context.Context, a *app) error {
	total := d.o.topics * d.o.partitions
	stopProgress := a.progress(func() string {
		return fmt.Sprintf("  working: %d/%d partitions done, %d metadata writes", d.partitionsDone.Load(), total, d.writes.Load())
	})
	defer stopProgress()
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(4 * d.o.brokers)
	for _, t := range d.topics {
		for _, p := range t.partitions {
			g.Go(func() error {
				if err := d.runPartition(ctx, p); err != nil {
					return fmt.Errorf("partition %s: %w", p.tp, err)
				}
				d.partitionsDone.Add(1)
				return nil
			})
		}
	}
	return g.Wait()
}

// runPartition is the life of one partition, each step done by the broker
// that would do it in Kafka.
func (d *demoRun) runPartition(ctx context.Context, p *demoPartition) error {
	last := len(p.segments) - 1
	for i, s := range p.segments {
		// The leader uploads; the segment spanning the change rolled after
		// it, so the new leader uploads it.
		broker := p.leaders[0]
		if i >= p.change {
			broker = p.leaders[1]
		}
		s.meta.BrokerID = int32(broker)
		s.meta.EventTimestampMs = time.Now().UnixMilli()
		if err := d.add(ctx, broker, s.meta); err != nil {
			return err
		}
		if p.index == 0 && i == last {
			continue // an upload still in progress
		}
		if err := d.update(ctx, s, broker, remotestorage.CopySegmentFinished); err != nil {
			return err
		}
	}

	// Retention, by the current leader.
	for i := range p.retained {
		s := p.segments[i]
		if err := d.update(ctx, s, p.leaders[1], remotestorage.DeleteSegmentStarted); err != nil {
			return err
		}
		if p.index == 0 && i == p.retained-1 {
			continue // a deletion still in progress
		}
		if err := d.update(ctx, s, p.leaders[1], remotestorage.DeleteSegmentFinished); err != nil {
			return err
		}
	}

	// A stale leader (it led epoch 0) retries finishing the copy of a
	// segment that retention has deleted since: refused.
	if p.topic.index == 0 && p.index == min(1, d.o.partitions-1) {
		s := p.segments[0]
		err := d.updateSegment(ctx, p.leaders[0], s, remotestorage.CopySegmentFinished)
		d.expectRefusal(err, remotestorage.ErrInvalidSegmentTransition, fmt.Sprintf(
			"broker %d (stale leader of epoch 0) retries COPY_SEGMENT_FINISHED of segment %s of %s-%d, which broker %d has moved to %s",
			p.leaders[0], s.meta.SegmentID.ID, p.tp.Topic, p.tp.Partition, p.leaders[1], s.state))
	}

	if p.topic.deleted {
		return d.deletePartition(ctx, p)
	}
	return nil
}

// deletePartition runs Kafka's partition-delete flow.
func (d *demoRun) deletePartition(ctx context.Context, p *demoPartition) error {
	put := func(broker int, state remotestorage.RemotePartitionDeleteState) error {
		return d.write(broker, fmt.Sprintf("broker %d puts %s for %s", broker, state, p.tp), func(w demoWriter) error {
			return w.PutRemotePartitionDeleteMetadata(ctx, remotestorage.RemotePartitionDeleteMetadata{
				TopicIDPartition: p.tp, State: state, EventTimestampMs: time.Now().UnixMilli(), BrokerID: int32(broker),
			})
		})
	}
	if err := put(controllerBroker, remotestorage.DeletePartitionMarked); err != nil {
		return err
	}
	leader := p.leaders[1]
	if p.index == 0 {
		// An upload that started before the topic was deleted tries to
		// register one more segment: refused once the partition is marked.
		late := p.segments[len(p.segments)-1].meta
		late.SegmentID.ID = uuid.New()
		late.StartOffset, late.EndOffset = late.EndOffset+1, late.EndOffset+offsetsPerSegment
		late.SegmentLeaderEpochs = map[remotestorage.LeaderEpoch]int64{1: late.StartOffset}
		late.State = remotestorage.CopySegmentStarted
		err := d.add(ctx, leader, late)
		d.expectRefusal(err, remotestorage.ErrInvalidAdd, fmt.Sprintf(
			"broker %d adds segment %d-%d to %s-%d after the topic was marked for deletion",
			leader, late.StartOffset, late.EndOffset, p.tp.Topic, p.tp.Partition))
	}
	for _, s := range p.segments {
		if s.state != remotestorage.DeleteSegmentStarted && s.state != remotestorage.DeleteSegmentFinished {
			if err := d.update(ctx, s, leader, remotestorage.DeleteSegmentStarted); err != nil {
				return err
			}
		}
		if s.state != remotestorage.DeleteSegmentFinished {
			if err := d.update(ctx, s, leader, remotestorage.DeleteSegmentFinished); err != nil {
				return err
			}
		}
	}
	if err := put(leader, remotestorage.DeletePartitionStarted); err != nil {
		return err
	}
	if err := put(leader, remotestorage.DeletePartitionFinished); err != nil {
		return err
	}
	p.deleted = true
	return nil
}

// demoWriter is what the simulation writes through: a broker's PgManager,
// and the in-memory reference.
type demoWriter interface {
	AddRemoteLogSegmentMetadata(context.Context, remotestorage.RemoteLogSegmentMetadata) error
	UpdateRemoteLogSegmentMetadata(context.Context, remotestorage.RemoteLogSegmentMetadataUpdate) error
	PutRemotePartitionDeleteMetadata(context.Context, remotestorage.RemotePartitionDeleteMetadata) error
}

// write makes one write through broker's manager, then the same write on
// the reference, and records a disagreement when one accepts what the
// other refuses. It returns the store's error.
func (d *demoRun) write(broker int, what string, w func(demoWriter) error) error {
	err := w(d.managers[broker])
	refErr := w(d.reference)
	if err == nil {
		d.writes.Add(1)
	}
	if (err == nil) != (refErr == nil) {
		d.disagree(fmt.Sprintf("%s: the store says %s, the in-memory reference %s", what, writeOutcome(err), writeOutcome(refErr)))
	}
	return err
}

func writeOutcome(err error) string {
	if err == nil {
		return "accepted"
	}
	return "refused (" + err.Error() + ")"
}

// add adds m through broker's manager and the reference.
func (d *demoRun) add(ctx context.Context, broker int, m remotestorage.RemoteLogSegmentMetadata) error {
	return d.write(broker, fmt.Sprintf("broker %d adds segment %s of %s", broker, m.SegmentID.ID, m.SegmentID.TopicIDPartition),
		func(w demoWriter) error { return w.AddRemoteLogSegmentMetadata(ctx, m) })
}

// updateSegment moves s to state through broker's manager and the
// reference; s.state stays as it was.
func (d *demoRun) updateSegment(ctx context.Context, broker int, s *demoSegment, state remotestorage.RemoteLogSegmentState) error {
	u := remotestorage.RemoteLogSegmentMetadataUpdate{
		SegmentID: s.meta.SegmentID, EventTimestampMs: time.Now().UnixMilli(), State: state, BrokerID: int32(broker),
	}
	return d.write(broker, fmt.Sprintf("broker %d moves segment %s of %s to %s", broker, s.meta.SegmentID.ID, s.meta.SegmentID.TopicIDPartition, state),
		func(w demoWriter) error { return w.UpdateRemoteLogSegmentMetadata(ctx, u) })
}

// update moves s to state, which the store must accept.
func (d *demoRun) update(ctx context.Context, s *demoSegment, broker int, state remotestorage.RemoteLogSegmentState) error {
	if err := d.updateSegment(ctx, broker, s, state); err != nil {
		return err
	}
	s.state = state
	return nil
}

// disagree records an answer of the store that differs from the
// reference's.
func (d *demoRun) disagree(what string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.unexpected = append(d.unexpected, what)
}

// expectRefusal records a write that the store must refuse with want.
func (d *demoRun) expectRefusal(err, want error, what string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case errors.Is(err, want):
		d.refusals = append(d.refusals, what+"\n      → refused: "+err.Error())
	case err == nil:
		d.unexpected = append(d.unexpected, what+": accepted, but the store must refuse it")
	default:
		d.unexpected = append(d.unexpected, what+": failed with "+err.Error()+", want "+want.Error())
	}
}
