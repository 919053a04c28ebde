package main

// purge.go: `rlmmctl purge`. A segment that reached
// DELETE_SEGMENT_FINISHED, or whose partition's delete finished, is
// forgotten: no query returns it, but its row keeps its id taken. Every
// broker (PgManager) purges such rows in the background once they have
// been forgotten for its retention (WithForgottenRetention, a week by
// default); this command reports what a retention would purge, and with
// --apply purges it through the same library call
// (PgManager.PurgeForgotten), for a cluster whose brokers purge nothing
// (retention 0) or to purge sooner.

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/cmd/rlmmctl/internal/ctldb"
)

// purgeTotals is what purge did, or would do, to one topic.
type purgeTotals struct {
	topic          string
	topicID        uuid.UUID
	segments       int64
	segmentBytes   int64 // summed segment_size_bytes: what the segments held in remote storage
	epochRows      int64
	customMetadata int64 // bytes of custom metadata released
}

func (a *app) purgeCommand() *cobra.Command {
	var olderThan time.Duration
	var apply, dropIDs bool // --drop-ids: deprecated, purging always frees the ids
	var batchSize int
	cmd := &cobra.Command{
		Use:   "purge [--older-than 168h] [--apply]",
		Short: "Reclaim the rows of segments forgotten longer ago than the retention",
		Long: `Reclaim the rows of forgotten segments - in DELETE_SEGMENT_FINISHED, or in
a partition whose delete finished (DELETE_PARTITION_FINISHED) - that were
forgotten longer ago than --older-than (default 168h, a week). The clock
is the database's, from the write that made the segment forgotten (a
broker's late retry of that write restarts it).

Brokers do this themselves in the background, with the retention their
library was given (WithForgottenRetention; a week by default, 0 turns it
off). Use this command where they purge nothing, or to purge sooner.

Without --apply this is a dry run: it reports per topic how many segments
it would purge, the bytes those segments held in remote storage
(SEGMENT_BYTES, already deleted there), their leader-epoch rows and their
custom metadata, and changes nothing.

With --apply each forgotten segment's rows are deleted (the segment row
and its epoch rows), which frees its id: an add may use it again. A
partition whose delete finished that long ago loses its delete record once
its segments are gone, so that adds to it work again. This is the
library's PurgeForgotten: batches of --batch-size segments, one statement
each, skipping rows a broker or another purge holds at that moment (the
next run gets them), so purge can run while brokers work.

` + databaseHelp,
		Example: `  rlmmctl purge                      # what would a week's retention purge?
  rlmmctl purge --older-than 720h --apply`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if olderThan < 0 {
				return usageErrorf("--older-than %s: want a duration of 0 or more", olderThan)
			}
			if batchSize < 1 {
				return usageErrorf("--batch-size %d: want at least 1", batchSize)
			}
			pool, err := openPool(ctx, resolveDatabase(a.databaseURL), a.scrub, 2)
			if err != nil {
				return err
			}
			defer pool.Close()
			// One cutoff for the whole run, from the database's clock, which
			// is the clock that wrote updated_at.
			cutoff, err := queries.PurgeCutoff(ctx, pool, olderThan.Seconds())
			if err != nil {
				return fmt.Errorf("compute the cutoff: %w", err)
			}
			fmt.Fprintf(a.stdout, "forgotten segments whose retention of %s ended (forgotten before %s UTC)\n",
				olderThan, cutoff.UTC().Format(time.DateTime))
			totals, err := previewPurge(ctx, pool, cutoff)
			if err != nil {
				return err
			}
			if !apply {
				a.writePurgeReport(totals, "would purge")
				if len(totals) > 0 {
					fmt.Fprintln(a.stdout, "dry run: nothing changed; run again with --apply to purge")
				}
				return nil
			}
			a.writePurgeReport(totals, "found")
			m, err := remotestorage.NewPgManager(ctx, pool,
				remotestorage.WithForgottenRetention(0), remotestorage.WithPurgeBatchSize(batchSize))
			if err != nil {
				return err
			}
			defer m.Close()
			stopProgress := a.progress(func() string { return fmt.Sprintf("purging: %d segments so far", m.PurgedSegments()) })
			purged, err := m.PurgeForgotten(ctx, olderThan)
			stopProgress()
			if err != nil {
				return fmt.Errorf("purge (%d segments purged before the failure): %w", purged, err)
			}
			fmt.Fprintf(a.stdout, "purged %d segments\n", purged)
			return nil
		},
	}
	cmd.Flags().DurationVar(&olderThan, "older-than", 168*time.Hour, "purge only segments forgotten longer ago than this")
	cmd.Flags().BoolVar(&apply, "apply", false, "purge (without it: a dry run that only reports)")
	cmd.Flags().BoolVar(&dropIDs, "drop-ids", false, "no effect: purging always deletes the segment rows")
	_ = cmd.Flags().MarkDeprecated("drop-ids", "purging always deletes the segment rows, freeing their ids")
	cmd.Flags().IntVar(&batchSize, "batch-size", remotestorage.DefaultPurgeBatchSize, "segments per statement")
	return cmd
}

func (a *app) writePurgeReport(totals []purgeTotals, verb string) {
	if len(totals) == 0 {
		fmt.Fprintf(a.stdout, "nothing to purge\n")
		return
	}
	sort.Slice(totals, func(i, j int) bool {
		if totals[i].topic != totals[j].topic {
			return totals[i].topic < totals[j].topic
		}
		return totals[i].topicID.String() < totals[j].topicID.String()
	})
	var sum purgeTotals
	tw := newTable(a.stdout)
	fmt.Fprintln(tw, "TOPIC\tTOPIC_ID\tSEGMENTS\tSEGMENT_BYTES\tEPOCH_ROWS\tCUSTOM_METADATA")
	for _, t := range totals {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\n", t.topic, bothTopicIDForms(t.topicID), t.segments,
			humanBytes(t.segmentBytes), t.epochRows, humanBytes(t.customMetadata))
		sum.segments += t.segments
		sum.segmentBytes += t.segmentBytes
		sum.epochRows += t.epochRows
		sum.customMetadata += t.customMetadata
	}
	tw.Flush()
	fmt.Fprintf(a.stdout, "%s %d segments in %d topics (%s in remote storage when they were live), %d epoch rows, %s of custom metadata\n",
		verb, sum.segments, len(totals), humanBytes(sum.segmentBytes), sum.epochRows, humanBytes(sum.customMetadata))
}

// previewPurge reports what PurgeForgotten would purge for the cutoff, per
// topic (queries/purge.sql says which segments those are).
func previewPurge(ctx context.Context, pool ctldb.DBTX, cutoff time.Time) ([]purgeTotals, error) {
	rows, err := queries.PurgePreview(ctx, pool, cutoff)
	if err != nil {
		return nil, fmt.Errorf("preview the purge: %w", err)
	}
	var out []purgeTotals
	for _, r := range rows {
		out = append(out, purgeTotals{topic: r.Topic, topicID: r.TopicID, segments: r.Segments,
			segmentBytes: r.SegmentBytes, epochRows: r.EpochRows, customMetadata: r.CustomMetadataBytes})
	}
	return out, nil
}
