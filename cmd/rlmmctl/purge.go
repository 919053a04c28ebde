package main

// purge.go: `rlmmctl purge`. The library never deletes a row: a segment
// that reached DELETE_SEGMENT_FINISHED, or whose partition's delete
// finished, is only *forgotten* (no query returns it) and keeps its id
// taken, so that a broker retrying an old add cannot resurrect it. Those
// rows pile up; purge reclaims them once they are old enough that no broker
// can still be acting on them.
//
// By default purge keeps the contract: it deletes the forgotten segments'
// epoch rows (the bulk of the indexes) and their custom metadata, but keeps
// the narrow segment row, so every id stays taken. --drop-ids deletes the
// segment rows too, which frees their ids: a purged id could be added
// again. Segment ids are random UUIDs chosen by brokers, so that takes a
// broker bug, but it is a departure from the API's promise and so opt-in.

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"
)

// forgottenSince is when a segment became forgotten: when it reached
// DELETE_SEGMENT_FINISHED, or when its partition's delete finished (the
// partition row is not written to after that), whichever came first.
const forgottenSince = `least(CASE WHEN s.state = 3 THEN s.updated_at END,
                            CASE WHEN p.delete_state = 2 THEN p.updated_at END)`

// purgeCandidates is the FROM/WHERE shared by the dry run and the purge.
// $1 is the cutoff. In compact mode a segment already compacted (no epoch
// rows, no custom metadata) is no longer a candidate.
func purgeCandidates(dropIDs bool) string {
	q := `
		FROM rlmm_segments s
		JOIN rlmm_partitions p ON p.topic_id = s.topic_id AND p.partition = s.partition
		WHERE (s.state = 3 OR p.delete_state = 2)
		  AND ` + forgottenSince + ` < $1`
	if !dropIDs {
		q += `
		  AND (s.custom_metadata IS NOT NULL OR EXISTS (
		        SELECT 1 FROM rlmm_segment_epochs e
		        WHERE e.topic_id = s.topic_id AND e.partition = s.partition AND e.segment_id = s.segment_id))`
	}
	return q
}

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
	var apply, dropIDs bool
	var batchSize int
	cmd := &cobra.Command{
		Use:   "purge [--older-than 168h] [--apply] [--drop-ids]",
		Short: "Reclaim the rows of segments forgotten longer ago than the retention",
		Long: `Reclaim the rows of forgotten segments - in DELETE_SEGMENT_FINISHED, or in
a partition whose delete finished (DELETE_PARTITION_FINISHED) - that were
forgotten longer ago than --older-than (default 168h, a week). The clock
is the rows' updated_at: the segment's last write, or for a deleted
partition the partition's last write (a broker's late retry restarts it).

Without --apply this is a dry run: it reports per topic how many segments
it would purge, the bytes those segments held in remote storage
(SEGMENT_BYTES, already deleted there), their leader-epoch rows and their
custom metadata, and changes nothing.

What is purged:
  default     the epoch rows and the custom metadata of each forgotten
              segment. Its narrow row in rlmm_segments stays, so its id
              stays taken as the API promises ("a forgotten id stays
              taken": a broker retrying an old add still gets
              ErrInvalidAdd). Brokers cannot tell the difference.
  --drop-ids  also the segment rows themselves (epoch rows first, then the
              segments). This frees their ids: a purged id could be
              re-added. Ids are random UUIDs picked by brokers, so that
              takes a broker bug or a very late retry; weigh that against
              the space the rows take.

Partition rows are always kept: a deleted partition must keep refusing
adds.

Rows are purged in batches of --batch-size segments, one transaction each,
skipping rows a broker holds locked at that moment (the next run gets
them), so purge can run while brokers work. With --drop-ids each batch
also locks the partition rows of its segments, first, as brokers do:
deleting segment rows marks their partitions so that the brokers' caches
drop the segments too (migration 00010), even a cache that lags behind.

` + databaseHelp,
		Example: `  rlmmctl purge                      # what would a week's retention purge?
  rlmmctl purge --older-than 720h --apply
  rlmmctl purge --apply --drop-ids`,
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
			var cutoff time.Time
			if err := pool.QueryRow(ctx, `SELECT now() - make_interval(secs => $1)`, olderThan.Seconds()).Scan(&cutoff); err != nil {
				return fmt.Errorf("compute the cutoff: %w", err)
			}
			mode := "keep the segment rows, so their ids stay taken; delete their epoch rows and custom metadata"
			if dropIDs {
				mode = "delete the segment rows and their epoch rows (--drop-ids: the ids become free)"
			}
			fmt.Fprintf(a.stdout, "forgotten segments whose retention of %s ended (forgotten before %s UTC)\n",
				olderThan, cutoff.UTC().Format(time.DateTime))
			fmt.Fprintf(a.stdout, "purge mode: %s\n", mode)

			var totals []purgeTotals
			var batches int
			if apply {
				var purged atomic.Int64
				stopProgress := a.progress(func() string { return fmt.Sprintf("purging: %d segments so far", purged.Load()) })
				totals, batches, err = purgeForgotten(ctx, pool, cutoff, dropIDs, batchSize, &purged)
				stopProgress()
			} else {
				totals, err = previewPurge(ctx, pool, cutoff, dropIDs)
			}
			if err != nil {
				return err
			}
			a.writePurgeReport(totals, apply)
			switch {
			case !apply && len(totals) > 0:
				fmt.Fprintln(a.stdout, "dry run: nothing changed; run again with --apply to purge")
			case apply:
				fmt.Fprintf(a.stdout, "purged in %d transactions\n", batches)
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&olderThan, "older-than", 168*time.Hour, "purge only segments forgotten longer ago than this")
	cmd.Flags().BoolVar(&apply, "apply", false, "purge (without it: a dry run that only reports)")
	cmd.Flags().BoolVar(&dropIDs, "drop-ids", false, "also delete the segment rows, freeing their ids (see above)")
	cmd.Flags().IntVar(&batchSize, "batch-size", 1000, "segments per transaction")
	return cmd
}

func (a *app) writePurgeReport(totals []purgeTotals, applied bool) {
	verb := "would purge"
	if applied {
		verb = "purged"
	}
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

// previewPurge reports what purgeForgotten would do, per topic.
func previewPurge(ctx context.Context, pool *pgxpool.Pool, cutoff time.Time, dropIDs bool) ([]purgeTotals, error) {
	rows, err := pool.Query(ctx, `
		SELECT s.topic, s.topic_id, count(*),
		       coalesce(sum(s.segment_size_bytes), 0)::bigint,
		       coalesce(sum(ec.n), 0)::bigint,
		       coalesce(sum(octet_length(s.custom_metadata)), 0)::bigint
		FROM (SELECT s.* `+purgeCandidates(dropIDs)+`) s
		CROSS JOIN LATERAL (
		    SELECT count(*) AS n FROM rlmm_segment_epochs e
		    WHERE e.topic_id = s.topic_id AND e.partition = s.partition AND e.segment_id = s.segment_id) ec
		GROUP BY s.topic, s.topic_id`, cutoff)
	if err != nil {
		return nil, fmt.Errorf("preview the purge: %w", err)
	}
	var t purgeTotals
	var out []purgeTotals
	_, err = pgx.ForEachRow(rows, []any{&t.topic, &t.topicID, &t.segments, &t.segmentBytes, &t.epochRows, &t.customMetadata},
		func() error {
			out = append(out, t)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("preview the purge: %w", err)
	}
	return out, nil
}

// purgeForgotten purges in batches, walking rlmm_segments in primary-key
// order (keyset pagination) so the whole run reads the table once instead
// of rescanning it per batch. Each batch is one transaction: lock the
// batch's candidates (skipping rows a broker holds), delete their epoch
// rows, then delete the segment rows or clear their custom metadata.
// purged counts the segments of the committed batches, for progress.
func purgeForgotten(ctx context.Context, pool *pgxpool.Pool, cutoff time.Time, dropIDs bool, batchSize int, purged *atomic.Int64) ([]purgeTotals, int, error) {
	byTopic := map[uuid.UUID]*purgeTotals{}
	var (
		lastTopicID   uuid.UUID
		lastPartition int32 = -1
		lastSegment   uuid.UUID
		batches       int
	)
	for {
		var done bool
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if dropIDs {
				// Deleting segment rows updates their partitions' rows
				// (migration 00010's trigger marks them for the brokers'
				// caches). Lock those first, in key order, as the brokers'
				// writes do, so that a broker writing one of these segments
				// meanwhile waits instead of deadlocking with the purge.
				if _, err := tx.Exec(ctx, `
					SELECT FROM rlmm_partitions p
					WHERE (p.topic_id, p.partition) IN (
					    SELECT s.topic_id, s.partition `+purgeCandidates(dropIDs)+`
					      AND (s.topic_id, s.partition, s.segment_id) > ($2, $3, $4)
					    ORDER BY s.topic_id, s.partition, s.segment_id
					    LIMIT $5)
					ORDER BY p.topic_id, p.partition
					FOR NO KEY UPDATE OF p`,
					cutoff, lastTopicID, lastPartition, lastSegment, batchSize); err != nil {
					return fmt.Errorf("lock the partitions: %w", err)
				}
			}
			rows, err := tx.Query(ctx, `
				SELECT s.topic, s.topic_id, s.partition, s.segment_id, s.segment_size_bytes,
				       coalesce(octet_length(s.custom_metadata), 0)
				`+purgeCandidates(dropIDs)+`
				  AND (s.topic_id, s.partition, s.segment_id) > ($2, $3, $4)
				ORDER BY s.topic_id, s.partition, s.segment_id
				LIMIT $5
				FOR UPDATE OF s SKIP LOCKED`,
				cutoff, lastTopicID, lastPartition, lastSegment, batchSize)
			if err != nil {
				return err
			}
			type victim struct {
				topic                string
				topicID              uuid.UUID
				partition            int32
				segmentID            uuid.UUID
				size, customMetadata int64
			}
			var v victim
			var victims []victim
			_, err = pgx.ForEachRow(rows, []any{&v.topic, &v.topicID, &v.partition, &v.segmentID, &v.size, &v.customMetadata},
				func() error {
					victims = append(victims, v)
					return nil
				})
			if err != nil {
				return err
			}
			if len(victims) == 0 {
				done = true
				return nil
			}
			topicIDs := make([]uuid.UUID, len(victims))
			partitions := make([]int32, len(victims))
			segmentIDs := make([]uuid.UUID, len(victims))
			for i, v := range victims {
				topicIDs[i], partitions[i], segmentIDs[i] = v.topicID, v.partition, v.segmentID
			}
			// Epoch rows first: explicit rather than through the foreign
			// key's cascade, so that compact mode (which keeps the segment
			// rows) and --drop-ids do the same to them, and we can count them.
			rows, err = tx.Query(ctx, `
				WITH victims AS (
				    SELECT * FROM unnest($1::uuid[], $2::integer[], $3::uuid[]) AS v(topic_id, partition, segment_id)
				), deleted AS (
				    DELETE FROM rlmm_segment_epochs e USING victims v
				    WHERE e.topic_id = v.topic_id AND e.partition = v.partition AND e.segment_id = v.segment_id
				    RETURNING e.topic_id)
				SELECT topic_id, count(*) FROM deleted GROUP BY topic_id`, topicIDs, partitions, segmentIDs)
			if err != nil {
				return fmt.Errorf("delete epoch rows: %w", err)
			}
			epochRows := map[uuid.UUID]int64{}
			var topicID uuid.UUID
			var n int64
			if _, err := pgx.ForEachRow(rows, []any{&topicID, &n}, func() error {
				epochRows[topicID] = n
				return nil
			}); err != nil {
				return fmt.Errorf("delete epoch rows: %w", err)
			}
			segmentSQL := `
				WITH victims AS (
				    SELECT * FROM unnest($1::uuid[], $2::integer[], $3::uuid[]) AS v(topic_id, partition, segment_id))
				UPDATE rlmm_segments s SET custom_metadata = NULL FROM victims v
				WHERE s.topic_id = v.topic_id AND s.partition = v.partition AND s.segment_id = v.segment_id`
			if dropIDs {
				segmentSQL = `
				WITH victims AS (
				    SELECT * FROM unnest($1::uuid[], $2::integer[], $3::uuid[]) AS v(topic_id, partition, segment_id))
				DELETE FROM rlmm_segments s USING victims v
				WHERE s.topic_id = v.topic_id AND s.partition = v.partition AND s.segment_id = v.segment_id`
			}
			if _, err := tx.Exec(ctx, segmentSQL, topicIDs, partitions, segmentIDs); err != nil {
				return fmt.Errorf("purge segment rows: %w", err)
			}
			for _, v := range victims {
				t := byTopic[v.topicID]
				if t == nil {
					t = &purgeTotals{topic: v.topic, topicID: v.topicID}
					byTopic[v.topicID] = t
				}
				t.segments++
				t.segmentBytes += v.size
				t.customMetadata += v.customMetadata
			}
			for id, n := range epochRows {
				byTopic[id].epochRows += n
			}
			last := victims[len(victims)-1]
			lastTopicID, lastPartition, lastSegment = last.topicID, last.partition, last.segmentID
			return nil
		})
		if err != nil {
			return nil, batches, fmt.Errorf("purge (after %d committed batches): %w", batches, err)
		}
		if done {
			break
		}
		batches++
		purged.Store(sumSegments(byTopic))
	}
	out := make([]purgeTotals, 0, len(byTopic))
	for _, t := range byTopic {
		out = append(out, *t)
	}
	return out, batches, nil
}

func sumSegments(byTopic map[uuid.UUID]*purgeTotals) int64 {
	var n int64
	for _, t := range byTopic {
		n += t.segments
	}
	return n
}
