package main

// demo.go: `rlmmctl demo`, a simulated Kafka cluster tiering segments
// through the whole lifecycle against a real database, then a report. It
// is the quickest way to see the store work, and doubles as a smoke test:
// the simulation knows the true answer to every lookup it prints, and the
// demo fails (exit 1) when the library answers differently.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgcluster"
)

// The shape of the simulated log.
const (
	offsetsPerSegment = 1000
	// epochChangeAt is where, inside the segment that spans the leadership
	// change, the new epoch starts.
	epochChangeAt = 400
	// demoDatabase is the database created in a throwaway cluster.
	demoDatabase = "rlmm_demo"
	// controllerBroker writes DELETE_PARTITION_MARKED, as Kafka's
	// controller does.
	controllerBroker = 0
)

// demoTopicNames are the topics' names; more topics get numbered names.
var demoTopicNames = []string{"orders", "payments", "clickstream", "inventory", "shipments", "audit-log"}

type demoOptions struct {
	keep       bool
	brokers    int
	topics     int
	partitions int
	segments   int
	seed       uint64
}

func (a *app) demoCommand() *cobra.Command {
	var o demoOptions
	cmd := &cobra.Command{
		Use:   "demo [--keep] [--brokers N] [--topics N] [--partitions N] [--segments N]",
		Short: "Simulate brokers tiering segments through the whole lifecycle, then report",
		Long: `Run a simulated Kafka cluster against a real database and report what the
store holds. Several brokers - each a PgManager over its own connection
pool, as separate broker processes would be - tier the segments of several
topics, each with a few partitions, concurrently:

  - every segment is copied: COPY_SEGMENT_STARTED, then COPY_SEGMENT_FINISHED;
  - half-way, a leadership change moves each partition to another broker
    and bumps the leader epoch from 0 to 1: one segment spans both epochs,
    later segments carry only the new one;
  - retention deletes the oldest quarter of the segments:
    DELETE_SEGMENT_STARTED, then DELETE_SEGMENT_FINISHED;
  - partition 0 of each topic keeps an upload and a deletion in flight;
  - a stale leader and a late add are refused, as the state machine requires;
  - the last topic is deleted: DELETE_PARTITION_MARKED, its segments
    deleted, DELETE_PARTITION_STARTED, DELETE_PARTITION_FINISHED.

The report shows, per topic, the segments per state and their bytes; lookups
that hit and lookups that miss, each with the reason; the highest offset of
each epoch; and the psql command that opens the same data.

The database: with no --database-url, no DATABASE_URL and no PGHOST, the
demo starts a throwaway PostgreSQL cluster from the local server binaries
(initdb, pg_ctl; apt-get install postgresql), creates the database
` + demoDatabase + ` and migrates it. It stops and deletes the cluster at the
end unless --keep, which leaves it running for psql and prints how to stop
it. With a configured database the demo migrates it (like "migrate up") and
adds its topics there, under fresh random topic ids.

The demo checks every answer against the simulation and exits 1 when the
store answers differently.

` + databaseHelp,
		Example: `  rlmmctl demo                        # throwaway cluster, deleted at the end
  rlmmctl demo --keep                 # ... left running, to explore with psql
  DATABASE_URL=postgres://rlmm:rlmm@localhost:5432/rlmm rlmmctl demo --segments 100`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case o.brokers < 1 || o.brokers > 64:
				return usageErrorf("--brokers %d: want 1 to 64", o.brokers)
			case o.topics < 2 || o.topics > 100:
				return usageErrorf("--topics %d: want 2 to 100 (the last one is deleted)", o.topics)
			case o.partitions < 1 || o.partitions > 100:
				return usageErrorf("--partitions %d: want 1 to 100", o.partitions)
			case o.segments < 4 || o.segments > 100000:
				return usageErrorf("--segments %d: want 4 to 100000 (the lifecycle needs at least 4)", o.segments)
			}
			return a.runDemo(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.keep, "keep", false, "leave the throwaway cluster running (and print how to stop it)")
	cmd.Flags().IntVar(&o.brokers, "brokers", 3, "number of simulated brokers")
	cmd.Flags().IntVar(&o.topics, "topics", 3, "number of topics (the last one is deleted)")
	cmd.Flags().IntVar(&o.partitions, "partitions", 3, "partitions per topic")
	cmd.Flags().IntVar(&o.segments, "segments", 20, "segments per partition")
	cmd.Flags().Uint64Var(&o.seed, "seed", 1, "seed of the segment sizes and timestamps")
	return cmd
}

// demoSegment is a segment of the simulation, with the state the
// simulation believes it is in.
type demoSegment struct {
	meta  remotestorage.RemoteLogSegmentMetadata
	state remotestorage.RemoteLogSegmentState
	added bool
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
	topics   []*demoTopic

	writes         atomic.Int64
	partitionsDone atomic.Int64

	mu         sync.Mutex
	refusals   []string
	unexpected []string
}

func (a *app) runDemo(ctx context.Context, o demoOptions) (err error) {
	out := a.stdout
	fmt.Fprintf(out, "rlmmctl demo: %d brokers tier %d topics × %d partitions × %d segments through the whole lifecycle\n",
		o.brokers, o.topics, o.partitions, o.segments)

	// The database.
	fmt.Fprintf(out, "\nDatabase\n")
	src := resolveDatabase(a.databaseURL)
	var cluster *pgcluster.Cluster
	if !src.configured() {
		fmt.Fprintf(out, "  no database configured (--database-url, DATABASE_URL, PGHOST): starting a throwaway PostgreSQL cluster\n")
		start := time.Now()
		cluster, err = pgcluster.Start(ctx, pgcluster.Options{})
		if err != nil {
			return fmt.Errorf("start a throwaway cluster: %w\n(or point the demo at a database with --database-url or DATABASE_URL)", err)
		}
		kept := false
		defer func() {
			if !kept {
				if stopErr := cluster.Stop(); stopErr != nil && err == nil {
					err = fmt.Errorf("stop the throwaway cluster: %w", stopErr)
				}
			}
		}()
		if err := createDatabase(ctx, cluster.URL("postgres"), demoDatabase); err != nil {
			return err
		}
		src = dbSource{dsn: cluster.URL(demoDatabase), from: "the throwaway cluster"}
		fmt.Fprintf(out, "  throwaway cluster in %s, started in %s\n", filepath.Dir(cluster.DataDir()), time.Since(start).Round(time.Millisecond))
		defer func() {
			// After the report: keep the cluster (psql) or say it is gone.
			if err == nil {
				kept, err = a.finishThrowaway(ctx, cluster, o.keep)
			}
		}()
	} else if o.keep {
		fmt.Fprintf(out, "  (--keep only matters for a throwaway cluster: a configured database keeps the data anyway)\n")
	}
	pool, err := openPool(ctx, src, a.scrub, 4)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := remotestorage.Migrate(ctx, pool); err != nil {
		return err
	}
	if cluster != nil {
		fmt.Fprintf(out, "  database %s created, migrated to schema version %d\n", demoDatabase, remotestorage.SchemaVersion)
	} else {
		fmt.Fprintf(out, "  database %s, migrated to schema version %d\n", src, remotestorage.SchemaVersion)
	}

	// The brokers: a manager each, over a pool of its own, as separate
	// broker processes would have.
	d := &demoRun{o: o}
	for range o.brokers {
		bp, err := openPool(ctx, src, a.scrub, 4)
		if err != nil {
			return err
		}
		defer bp.Close()
		m, err := remotestorage.NewPgManager(ctx, bp)
		if err != nil {
			return err
		}
		defer m.Close()
		d.managers = append(d.managers, m)
	}
	d.plan()

	fmt.Fprintf(out, "\nSimulation\n")
	d.describe(a)
	start := time.Now()
	if err := d.simulate(ctx, a); err != nil {
		return err
	}
	elapsed := time.Since(start)
	fmt.Fprintf(out, "  done: %d metadata writes in %s (%.0f writes/s)\n",
		d.writes.Load(), elapsed.Round(time.Millisecond), float64(d.writes.Load())/elapsed.Seconds())

	if err := d.reportTopics(ctx, a, pool); err != nil {
		return err
	}
	d.reportRefusals(a)
	if err := d.reportLookups(ctx, a); err != nil {
		return err
	}
	if err := d.reportHighestOffsets(ctx, a); err != nil {
		return err
	}
	a.reportOpenData(src, cluster, o.keep)

	if len(d.unexpected) > 0 {
		return fmt.Errorf("the store answered %d times differently than the simulation expects:\n  %s",
			len(d.unexpected), strings.Join(d.unexpected, "\n  "))
	}
	return nil
}

// createDatabase creates dbname through the maintenance database.
func createDatabase(ctx context.Context, adminURL, dbname string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect to the throwaway cluster: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{dbname}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", dbname, err)
	}
	return nil
}

// plan lays out every topic, partition and segment before anything is
// written, from the seed, so that the report can know the true answers.
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
		if err := d.managers[broker].AddRemoteLogSegmentMetadata(ctx, s.meta); err != nil {
			return err
		}
		d.writes.Add(1)
		s.added = true
		if p.index == 0 && i == last {
			continue // an upload still in progress
		}
		if err := d.update(ctx, p, s, broker, remotestorage.CopySegmentFinished); err != nil {
			return err
		}
	}

	// Retention, by the current leader.
	for i := range p.retained {
		s := p.segments[i]
		if err := d.update(ctx, p, s, p.leaders[1], remotestorage.DeleteSegmentStarted); err != nil {
			return err
		}
		if p.index == 0 && i == p.retained-1 {
			continue // a deletion still in progress
		}
		if err := d.update(ctx, p, s, p.leaders[1], remotestorage.DeleteSegmentFinished); err != nil {
			return err
		}
	}

	// A stale leader (it led epoch 0) retries finishing the copy of a
	// segment that retention has deleted since: refused.
	if p.topic.index == 0 && p.index == min(1, d.o.partitions-1) {
		s := p.segments[0]
		err := d.managers[p.leaders[0]].UpdateRemoteLogSegmentMetadata(ctx, remotestorage.RemoteLogSegmentMetadataUpdate{
			SegmentID: s.meta.SegmentID, EventTimestampMs: time.Now().UnixMilli(),
			State: remotestorage.CopySegmentFinished, BrokerID: int32(p.leaders[0]),
		})
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
		err := d.managers[broker].PutRemotePartitionDeleteMetadata(ctx, remotestorage.RemotePartitionDeleteMetadata{
			TopicIDPartition: p.tp, State: state, EventTimestampMs: time.Now().UnixMilli(), BrokerID: int32(broker),
		})
		if err == nil {
			d.writes.Add(1)
		}
		return err
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
		err := d.managers[leader].AddRemoteLogSegmentMetadata(ctx, late)
		d.expectRefusal(err, remotestorage.ErrInvalidAdd, fmt.Sprintf(
			"broker %d adds segment %d-%d to %s-%d after the topic was marked for deletion",
			leader, late.StartOffset, late.EndOffset, p.tp.Topic, p.tp.Partition))
	}
	for _, s := range p.segments {
		if s.state != remotestorage.DeleteSegmentStarted && s.state != remotestorage.DeleteSegmentFinished {
			if err := d.update(ctx, p, s, leader, remotestorage.DeleteSegmentStarted); err != nil {
				return err
			}
		}
		if s.state != remotestorage.DeleteSegmentFinished {
			if err := d.update(ctx, p, s, leader, remotestorage.DeleteSegmentFinished); err != nil {
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

// update moves s to state through broker's manager.
func (d *demoRun) update(ctx context.Context, p *demoPartition, s *demoSegment, broker int, state remotestorage.RemoteLogSegmentState) error {
	err := d.managers[broker].UpdateRemoteLogSegmentMetadata(ctx, remotestorage.RemoteLogSegmentMetadataUpdate{
		SegmentID: s.meta.SegmentID, EventTimestampMs: time.Now().UnixMilli(), State: state, BrokerID: int32(broker),
	})
	if err != nil {
		return err
	}
	d.writes.Add(1)
	s.state = state
	return nil
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

func (d *demoRun) reportTopics(ctx context.Context, a *app, pool *pgxpool.Pool) error {
	out := a.stdout
	fmt.Fprintf(out, "\nTopics (segment rows per state; BYTES: the segments not forgotten)\n")
	tw := newTable(out)
	fmt.Fprintln(tw, "  TOPIC\tPARTITIONS\tCOPY_STARTED\tCOPY_FINISHED\tDELETE_STARTED\tDELETE_FINISHED\tBYTES\tDELETE_STATE")
	for _, t := range d.topics {
		parts, err := listPartitions(ctx, pool, partitionFilter{topicID: t.id})
		if err != nil {
			return err
		}
		var counts [4]int64
		var bytes int64
		deleteStates := map[string]bool{}
		for _, p := range parts {
			for s := range counts {
				counts[s] += p.segmentCount(remotestorage.RemoteLogSegmentState(s))
			}
			bytes += p.LiveBytes
			deleteStates[p.DeleteState] = true
		}
		deleteState := "mixed"
		if len(deleteStates) == 1 {
			for s := range deleteStates {
				deleteState = s
			}
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", t.name, len(parts),
			counts[0], counts[1], counts[2], counts[3], humanBytes(bytes), deleteState)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "  topic ids, as UUIDs and as kafka-topics --describe prints them (rlmmctl takes either):\n")
	tw = newTable(out)
	for _, t := range d.topics {
		fmt.Fprintf(tw, "    %s\t%s\t%s\n", t.name, t.id, kafkaTopicID(t.id))
	}
	return tw.Flush()
}

func (d *demoRun) reportRefusals(a *app) {
	slices.Sort(d.refusals) // they happened concurrently: a stable order reads better
	fmt.Fprintf(a.stdout, "\nRefused writes (the state machine at work)\n")
	for _, r := range d.refusals {
		fmt.Fprintf(a.stdout, "  %s\n", r)
	}
}

// demoLookup is one lookup the report makes, with why it should hit or miss.
type demoLookup struct {
	p      *demoPartition
	epoch  remotestorage.LeaderEpoch
	offset int64
	why    string
}

// reportLookups asks the store through a broker's manager, as a fetch from
// remote storage would, and checks every answer against the simulation.
func (d *demoRun) reportLookups(ctx context.Context, a *app) error {
	out := a.stdout
	p := d.topics[0].partitions[0] // the partition with an upload and a deletion in flight
	gone := d.deletedTopic().partitions[0]
	seg := func(i int) *demoSegment { return p.segments[i] }
	changeStart := seg(p.change).meta.StartOffset
	last := seg(len(p.segments) - 1)
	var lookups []demoLookup
	if p.retained > 1 {
		lookups = append(lookups, demoLookup{p, 0, seg(0).meta.StartOffset + 10,
			"deleted by retention (DELETE_SEGMENT_FINISHED): forgotten"})
	}
	lookups = append(lookups, []demoLookup{
		{p, 0, seg(p.retained).meta.StartOffset + 500,
			"an epoch-0 segment that retention kept"},
		{p, 0, changeStart + epochChangeAt - 1,
			fmt.Sprintf("the last offset of epoch 0, in the segment that spans the leadership change (epoch 0 covers %d-%d there)",
				changeStart, changeStart+epochChangeAt-1)},
		{p, 1, changeStart + epochChangeAt,
			"the first offset of epoch 1, in the same segment"},
		{p, 0, changeStart + epochChangeAt,
			fmt.Sprintf("that offset belongs to epoch 1: epoch 0's range in the spanning segment ends at %d", changeStart+epochChangeAt-1)},
		{p, 0, seg(p.retained-1).meta.StartOffset + 10,
			"its deletion is in progress (DELETE_SEGMENT_STARTED): deleting segments answer no lookup"},
		{p, 1, last.meta.StartOffset + 10,
			"its upload is in progress (COPY_SEGMENT_STARTED): not visible until COPY_SEGMENT_FINISHED"},
		{p, 1, last.meta.EndOffset + 1,
			"beyond the end of remote storage: the broker serves it from local disk"},
		{p, 2, changeStart + epochChangeAt,
			"no segment carries epoch 2"},
		{gone, 1, gone.segments[len(gone.segments)-2].meta.StartOffset + 10,
			"topic " + gone.topic.name + " was deleted: DELETE_PARTITION_FINISHED forgets every segment"},
	}...)
	fmt.Fprintf(out, "\nLookups (RemoteLogSegmentMetadata through broker 0, as a fetch from remote storage would)\n")
	for _, l := range lookups {
		got, found, err := d.managers[0].RemoteLogSegmentMetadata(ctx, l.p.tp, l.epoch, l.offset)
		if err != nil {
			return err
		}
		want := l.p.expectedLookup(l.epoch, l.offset)
		where := fmt.Sprintf("%s-%d epoch %d offset %d", l.p.tp.Topic, l.p.tp.Partition, l.epoch, l.offset)
		if found {
			first, lastOff := epochRangeOf(got, l.epoch)
			fmt.Fprintf(out, "  HIT   %s → segment %s, offsets %d-%d (epoch %d: %d-%d)\n        %s\n",
				where, got.SegmentID.ID, got.StartOffset, got.EndOffset, l.epoch, first, lastOff, l.why)
		} else {
			fmt.Fprintf(out, "  MISS  %s → no segment: %s\n", where, l.why)
		}
		switch {
		case want == nil && found:
			d.unexpected = append(d.unexpected, where+": the store found segment "+got.SegmentID.ID.String()+", the simulation expects a miss")
		case want != nil && !found:
			d.unexpected = append(d.unexpected, where+": the store missed, the simulation expects segment "+want.meta.SegmentID.ID.String())
		case want != nil && got.SegmentID.ID != want.meta.SegmentID.ID:
			d.unexpected = append(d.unexpected, where+": the store found segment "+got.SegmentID.ID.String()+
				", the simulation expects "+want.meta.SegmentID.ID.String())
		}
	}
	return nil
}

// epochRangeOf is the offset range of epoch e inside s.
func epochRangeOf(s remotestorage.RemoteLogSegmentMetadata, e remotestorage.LeaderEpoch) (first, last int64) {
	for _, r := range epochRanges(s.SegmentLeaderEpochs, s.EndOffset) {
		if remotestorage.LeaderEpoch(r.Epoch) == e {
			return r.FirstOffset, r.LastOffset
		}
	}
	return -1, -1
}

// expectedLookup is the API's lookup rule over the simulation's own
// record: the finished segment whose range of epoch e holds offset, the
// range starting latest winning.
func (p *demoPartition) expectedLookup(e remotestorage.LeaderEpoch, offset int64) *demoSegment {
	if p.deleted {
		return nil
	}
	var best *demoSegment
	var bestFirst int64
	for _, s := range p.segments {
		if s.state != remotestorage.CopySegmentFinished {
			continue
		}
		first, last := epochRangeOf(s.meta, e)
		if first >= 0 && first <= offset && offset <= last && (best == nil || first > bestFirst) {
			best, bestFirst = s, first
		}
	}
	return best
}

// expectedHighest is HighestOffsetForEpoch over the simulation's record.
func (p *demoPartition) expectedHighest(e remotestorage.LeaderEpoch) (int64, bool) {
	var highest int64
	found := false
	for _, s := range p.segments {
		if _, ok := s.meta.SegmentLeaderEpochs[e]; ok && s.state == remotestorage.CopySegmentFinished && !p.deleted {
			highest, found = max(highest, s.meta.EndOffset), true
		}
	}
	return highest, found
}

func (d *demoRun) reportHighestOffsets(ctx context.Context, a *app) error {
	out := a.stdout
	fmt.Fprintf(out, "\nHighest offsets per epoch (HighestOffsetForEpoch: the end of the last finished segment carrying the epoch)\n")
	tw := newTable(out)
	fmt.Fprintln(tw, "  PARTITION\tEPOCH 0\tEPOCH 1\tNOTE")
	for _, t := range d.topics {
		for _, p := range t.partitions {
			cells := make([]string, 2)
			for e := range remotestorage.LeaderEpoch(2) {
				got, found, err := d.managers[0].HighestOffsetForEpoch(ctx, p.tp, e)
				if err != nil {
					return err
				}
				want, wantFound := p.expectedHighest(e)
				if found != wantFound || got != want {
					d.unexpected = append(d.unexpected, fmt.Sprintf("highest offset of epoch %d in %s-%d: the store says %d (found %t), the simulation %d (found %t)",
						e, p.tp.Topic, p.tp.Partition, got, found, want, wantFound))
				}
				cells[e] = "none"
				if found {
					cells[e] = fmt.Sprint(got)
				}
			}
			note := ""
			switch {
			case p.deleted:
				note = "topic deleted: every segment forgotten"
			case p.index == 0:
				note = "the last segment's upload is still in progress"
			}
			fmt.Fprintf(tw, "  %s-%d\t%s\t%s\t%s\n", p.tp.Topic, p.tp.Partition, cells[0], cells[1], note)
		}
	}
	return tw.Flush()
}

// reportOpenData prints how to look at the data with psql and rlmmctl.
func (a *app) reportOpenData(src dbSource, cluster *pgcluster.Cluster, keep bool) {
	out := a.stdout
	fmt.Fprintf(out, "\nOpen the data\n")
	if cluster != nil && !keep {
		fmt.Fprintf(out, "  the throwaway cluster is stopped and deleted now; run \"rlmmctl demo --keep\" to explore the data with psql\n")
		return
	}
	var psql, dsn string
	if cluster != nil {
		psql = fmt.Sprintf("psql -h %s -p %d -U postgres %s", cluster.SocketDir(), cluster.Port(), demoDatabase)
		dsn = cluster.URL(demoDatabase)
	} else {
		// Without the password: psql asks for it, or takes PGPASSWORD or
		// ~/.pgpass, and this line can be pasted anywhere.
		dsn = redactDSN(src.dsn, "")
		psql = "psql " + shellQuote(dsn)
		if src.dsn == "" {
			psql = "psql   # with the same PG* variables"
		}
	}
	fmt.Fprintf(out, "  %s\n", psql)
	fmt.Fprintf(out, "  e.g.  SELECT topic, partition, state, count(*) FROM rlmm_segments GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;\n")
	if dsn != "" {
		fmt.Fprintf(out, "  or    rlmmctl --database-url %s partitions list\n", shellQuote(dsn))
	}
}

// finishThrowaway keeps the throwaway cluster running (--keep) or leaves it
// to the deferred Stop. kept reports whether the caller must not stop it.
func (a *app) finishThrowaway(ctx context.Context, cluster *pgcluster.Cluster, keep bool) (kept bool, err error) {
	if !keep {
		return false, nil
	}
	out := a.stdout
	base := filepath.Dir(cluster.DataDir())
	stop := fmt.Sprintf("%s -D %s stop", filepath.Join(cluster.BinDir(), "pg_ctl"), cluster.DataDir())
	if os.Geteuid() == 0 {
		// PostgreSQL runs as the postgres user when we are root.
		stop = "su postgres -c " + shellQuote(stop)
	}
	remove := "rm -rf " + base
	if !strings.HasPrefix(cluster.SocketDir(), base+string(filepath.Separator)) {
		remove += " " + cluster.SocketDir()
	}
	// pgcluster stops a cluster whose owner exits (its watchdog sees our
	// end of a pipe close); detaching tells it this one is meant to live on.
	if detacher, ok := any(cluster).(interface{ Detach() error }); ok {
		if err := detacher.Detach(); err != nil {
			return false, fmt.Errorf("keep the throwaway cluster: %w", err)
		}
		fmt.Fprintf(out, "\nThe throwaway cluster keeps running (--keep). Stop and delete it with:\n  %s && %s\n", stop, remove)
		return true, nil
	}
	// This pgcluster cannot hand its cluster over: keep it alive by staying
	// alive ourselves.
	fmt.Fprintf(out, "\nThe throwaway cluster runs until rlmmctl exits: press Ctrl-C to stop and delete it.\n")
	<-ctx.Done()
	fmt.Fprintf(out, "stopping and deleting the throwaway cluster\n")
	return false, nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@=,+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// progress shows a line that refreshes while long work runs, when stdout is
// a terminal (never in pipes, files and tests). The returned func erases it.
func (a *app) progress(line func() string) (stop func()) {
	if !a.stdoutIsTerminal {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				fmt.Fprint(a.stdout, "\r\033[K")
				return
			case <-tick.C:
				fmt.Fprint(a.stdout, "\r\033[K"+line())
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
