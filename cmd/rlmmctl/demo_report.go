package main

// demo_report.go: the demo's report: what the store holds, the refused
// writes, lookups and highest offsets checked against the in-memory
// reference, and how to open the data.

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgcluster"
)

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
// remote storage would, and checks every answer against the reference's.
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
		want, wantFound, err := d.reference.RemoteLogSegmentMetadata(ctx, l.p.tp, l.epoch, l.offset)
		if err != nil {
			return err
		}
		where := fmt.Sprintf("%s-%d epoch %d offset %d", l.p.tp.Topic, l.p.tp.Partition, l.epoch, l.offset)
		if found {
			first, lastOff := epochRangeOf(got, l.epoch)
			fmt.Fprintf(out, "  HIT   %s → segment %s, offsets %d-%d (epoch %d: %d-%d)\n        %s\n",
				where, got.SegmentID.ID, got.StartOffset, got.EndOffset, l.epoch, first, lastOff, l.why)
		} else {
			fmt.Fprintf(out, "  MISS  %s → no segment: %s\n", where, l.why)
		}
		switch {
		case !wantFound && found:
			d.disagree(where + ": the store found segment " + got.SegmentID.ID.String() + ", the in-memory reference misses")
		case wantFound && !found:
			d.disagree(where + ": the store missed, the in-memory reference finds segment " + want.SegmentID.ID.String())
		case wantFound && got.SegmentID.ID != want.SegmentID.ID:
			d.disagree(where + ": the store found segment " + got.SegmentID.ID.String() +
				", the in-memory reference " + want.SegmentID.ID.String())
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
				want, wantFound, err := d.reference.HighestOffsetForEpoch(ctx, p.tp, e)
				if err != nil {
					return err
				}
				if found != wantFound || got != want {
					d.disagree(fmt.Sprintf("highest offset of epoch %d in %s-%d: the store says %d (found %t), the in-memory reference %d (found %t)",
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
