-- FirstSegmentForTimestamp and EpochEndOffset. No write raises a
-- high-water mark: EpochEndOffset reads the finished epoch rows, and
-- rlmm_epoch_ends the ends of those rlmm_purge_round deleted.

-- name: SegmentFirstForTimestamp :one
-- The first finished segment carrying @epoch, in list order (start offset,
-- then added version), whose end offset >= @starting_offset and whose
-- max_timestamp_ms >= @timestamp_ms. A walk of the epoch's rows in
-- rlmm_segment_epochs_list_idx, which is in list order, filtered on the
-- copies each row carries (max_timestamp_ms), then the segment by its id,
-- from start offset @starting_offset - max_segment_span (the partition row,
-- by primary key: no segment of the partition is longer, so none starting
-- earlier reaches @starting_offset; no row: no segment was ever added, and
-- the walk is empty).
SELECT s.topic_id, s.partition, s.segment_id, s.topic, s.start_offset, s.end_offset, s.max_timestamp_ms,
       s.broker_id, s.event_timestamp_ms, s.segment_size_bytes, s.custom_metadata, s.state, s.txn_index_empty,
       s.epochs, s.epoch_start_offsets, s.added_version /* the API's columns: see the top of segments.sql */
FROM rlmm_segments s
WHERE s.segment_id = (
    SELECT e.segment_id
    FROM rlmm_segment_epochs e
    WHERE e.topic_id = @topic_id::uuid AND e.partition = @partition::integer AND e.epoch = @epoch::integer
      -- The walk must follow rlmm_segment_epochs_list_idx (state IN (0, 1,
      -- 2)) in its order. "COPY_SEGMENT_FINISHED" is spelled "not 0 and not
      -- 2": "state = 1" would match the predicate of the indexes in another
      -- order, and "state::integer = 1", an expression the planner gives a
      -- selectivity of 0.5 %, made a generic plan expect one row and read
      -- the whole epoch into a sort rather than walk it.
      AND e.state IN (0, 1, 2) /* COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED */
      AND e.state <> 0 AND e.state <> 2 /* COPY_SEGMENT_FINISHED */
      AND e.segment_start_offset >= (@starting_offset::bigint) - (
          SELECT p.max_segment_span FROM rlmm_partitions p
          WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer)
      AND e.segment_end_offset >= @starting_offset::bigint
      AND e.max_timestamp_ms >= @timestamp_ms::bigint
    ORDER BY e.segment_start_offset, e.added_version
    LIMIT 1)
  AND (s.topic_id = @topic_id::uuid AND s.partition = @partition::integer) IS TRUE
  AND NOT EXISTS (SELECT 1 FROM rlmm_partitions p
                  WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer AND p.delete_state = 2 /* DELETE_PARTITION_FINISHED */);

-- name: EpochEndOffset :one
-- Kafka's highest offset for @epoch: the largest end of the epoch's range in
-- a segment that reached COPY_SEGMENT_FINISHED, deleted since or not: the
-- greater of the finished epoch rows' (one backward descent of
-- rlmm_segment_epochs_ends_idx) and the purged segments'
-- (rlmm_epoch_ends, by primary key). No row: none such, or the partition's
-- delete finished.
SELECT ends.end_offset::bigint AS end_offset
FROM (SELECT greatest(
        (SELECT e.last_offset FROM rlmm_segment_epochs e
         WHERE e.topic_id = @topic_id::uuid AND e.partition = @partition::integer AND e.epoch = @epoch::integer
           AND e.finished_version IS NOT NULL
         ORDER BY e.last_offset DESC
         LIMIT 1),
        (SELECT ee.end_offset FROM rlmm_epoch_ends ee
         WHERE ee.topic_id = @topic_id::uuid AND ee.partition = @partition::integer AND ee.epoch = @epoch::integer)
     ) AS end_offset) AS ends
WHERE ends.end_offset IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM rlmm_partitions p
                  WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer AND p.delete_state = 2 /* DELETE_PARTITION_FINISHED */);

-- name: EpochEndsLoad :many
-- A cache's load: EpochEndOffset of every epoch of the partition, read in
-- the load's snapshot (the cache raises them again from each finished
-- segment it holds; the forgotten and the purged ones it only learns
-- here). Two descents of rlmm_segment_epochs_ends_idx per epoch (the next
-- epoch, then its largest end: a skip scan, however many rows), and the
-- purged segments' rows of rlmm_epoch_ends.
WITH RECURSIVE epochs AS (
    (SELECT e.epoch FROM rlmm_segment_epochs e
     WHERE e.topic_id = @topic_id::uuid AND e.partition = @partition::integer AND e.finished_version IS NOT NULL
     ORDER BY e.epoch LIMIT 1)
    UNION ALL
    SELECT (SELECT e.epoch FROM rlmm_segment_epochs e
            WHERE e.topic_id = @topic_id::uuid AND e.partition = @partition::integer AND e.finished_version IS NOT NULL
              AND e.epoch > epochs.epoch
            ORDER BY e.epoch LIMIT 1)
    FROM epochs
    WHERE epochs.epoch IS NOT NULL
)
SELECT x.epoch::integer AS epoch, max(x.end_offset)::bigint AS end_offset
FROM (
    SELECT epochs.epoch,
        (SELECT e.last_offset FROM rlmm_segment_epochs e
         WHERE e.topic_id = @topic_id::uuid AND e.partition = @partition::integer AND e.finished_version IS NOT NULL
           AND e.epoch = epochs.epoch
         ORDER BY e.last_offset DESC LIMIT 1) AS end_offset
    FROM epochs
    WHERE epochs.epoch IS NOT NULL
    UNION ALL
    SELECT ee.epoch, ee.end_offset FROM rlmm_epoch_ends ee
    WHERE ee.topic_id = @topic_id::uuid AND ee.partition = @partition::integer
) AS x
GROUP BY x.epoch;
