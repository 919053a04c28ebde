-- FirstSegmentForTimestamp and EpochEndOffset. No write raises a
-- high-water mark: EpochEndOffset reads the finished segments and epoch
-- rows, and rlmm_epoch_ends the ends of those rlmm_purge_round deleted.

-- name: SegmentFirstForTimestamp :one
-- The first finished segment carrying @epoch, in list order (start offset,
-- then added version), whose end offset >= @starting_offset and whose
-- max_timestamp_ms >= @timestamp_ms: the first of two walks in list order,
-- of rlmm_segment_epochs_list_idx (segments spanning several epochs,
-- filtered on the copies each row carries) and of
-- rlmm_segments_epoch_list_idx (segments of that one epoch), then the
-- segment by its id. Each walk starts at start offset @starting_offset -
-- max_segment_span (the partition row, by primary key: no segment of the
-- partition is longer, so none starting earlier reaches @starting_offset;
-- no row: no segment was ever added, and the walks are empty).
SELECT s.topic_id, s.partition, s.segment_id, s.topic, s.start_offset, s.end_offset, s.max_timestamp_ms,
       s.broker_id, s.event_timestamp_ms, s.segment_size_bytes, s.custom_metadata, s.state, s.txn_index_empty,
       s.epochs, s.epoch_start_offsets, s.added_version /* the API's columns: see the top of segments.sql */
FROM rlmm_segments s
WHERE s.segment_id = (
    SELECT c.segment_id
    FROM ((SELECT e.segment_id, e.segment_start_offset AS start_offset, e.added_version
           FROM rlmm_segment_epochs e
           WHERE e.topic_id = @topic_id::uuid AND e.partition = @partition::integer AND e.epoch = @epoch::integer
             -- Each walk must follow its list index (state IN (0, 1, 2))
             -- in its order. "COPY_SEGMENT_FINISHED" is spelled "not 0 and
             -- not 2": "state = 1" would match the predicate of the
             -- indexes in another order, and "state::integer = 1", an
             -- expression the planner gives a selectivity of 0.5 %, made a
             -- generic plan expect one row and read the whole epoch into a
             -- sort rather than walk it.
             AND e.state IN (0, 1, 2) /* COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED */
             AND e.state <> 0 AND e.state <> 2 /* COPY_SEGMENT_FINISHED */
             AND e.segment_start_offset >= (@starting_offset::bigint) - (
                 SELECT p.max_segment_span FROM rlmm_partitions p
                 WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer)
             AND e.segment_end_offset >= @starting_offset::bigint
             AND e.max_timestamp_ms >= @timestamp_ms::bigint
           ORDER BY e.segment_start_offset, e.added_version
           LIMIT 1)
          UNION ALL
          (SELECT o.segment_id, o.start_offset, o.added_version
           FROM rlmm_segments o
           WHERE o.topic_id = @topic_id::uuid AND o.partition = @partition::integer AND o.epochs[1] = @epoch::integer
             AND o.state IN (0, 1, 2) /* COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED */
             AND o.state <> 0 AND o.state <> 2 /* COPY_SEGMENT_FINISHED */
             AND cardinality(o.epochs) = 1
             AND o.start_offset >= (@starting_offset::bigint) - (
                 SELECT p.max_segment_span FROM rlmm_partitions p
                 WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer)
             AND o.end_offset >= @starting_offset::bigint
             AND o.max_timestamp_ms >= @timestamp_ms::bigint
           ORDER BY o.start_offset, o.added_version
           LIMIT 1)) AS c
    ORDER BY c.start_offset, c.added_version
    LIMIT 1)
  AND (s.topic_id = @topic_id::uuid AND s.partition = @partition::integer) IS TRUE
  AND NOT EXISTS (SELECT 1 FROM rlmm_partitions p
                  WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer AND p.delete_state = 2 /* DELETE_PARTITION_FINISHED */);

-- name: EpochEndOffset :one
-- Kafka's highest offset for @epoch: the largest end of the epoch's range in
-- a segment that reached COPY_SEGMENT_FINISHED, deleted since or not: the
-- greatest of the finished segments of that one epoch's (one backward
-- descent of rlmm_segments_epoch_ends_idx), the finished epoch rows' (one
-- of rlmm_segment_epochs_ends_idx) and the purged segments'
-- (rlmm_epoch_ends, by primary key). No row: none such, or the partition's
-- delete finished.
SELECT ends.end_offset::bigint AS end_offset
FROM (SELECT greatest(
        (SELECT s.end_offset FROM rlmm_segments s
         WHERE s.topic_id = @topic_id::uuid AND s.partition = @partition::integer AND s.epochs[1] = @epoch::integer
           AND s.finished_version IS NOT NULL AND cardinality(s.epochs) = 1
         ORDER BY s.end_offset DESC
         LIMIT 1),
        (SELECT e.last_offset FROM rlmm_segment_epochs e
         WHERE e.topic_id = @topic_id::uuid AND e.partition = @partition::integer AND e.epoch = @epoch::integer
           AND e.finished_version IS NOT NULL
         ORDER BY e.last_offset DESC
         LIMIT 1),
        (SELECT ee.end_offset FROM rlmm_epoch_ends ee
         WHERE ee.topic_id = @topic_id::uuid AND ee.partition = @partition::integer AND ee.epoch = @epoch::integer)
     ) AS end_offset OFFSET 0) AS ends /* OFFSET 0: the WHERE below reads the column, not a copy of greatest() and its sub-selects */
WHERE ends.end_offset IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM rlmm_partitions p
                  WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer AND p.delete_state = 2 /* DELETE_PARTITION_FINISHED */);

-- name: EpochEndsLoad :many
-- A cache's load: EpochEndOffset of every epoch of the partition, read in
-- the load's snapshot (the cache raises them again from each finished
-- segment it holds; the forgotten and the purged ones it only learns
-- here). Two skip scans, two descents per epoch each (the next epoch, then
-- its largest end, however many rows): of rlmm_segments_epoch_ends_idx
-- (segments of one epoch) and of rlmm_segment_epochs_ends_idx (epoch rows
-- of those spanning several); and the purged segments' rows of
-- rlmm_epoch_ends.
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
), single_epochs AS (
    (SELECT s.epochs[1] AS epoch FROM rlmm_segments s
     WHERE s.topic_id = @topic_id::uuid AND s.partition = @partition::integer
       AND s.finished_version IS NOT NULL AND cardinality(s.epochs) = 1
     ORDER BY s.epochs[1] LIMIT 1)
    UNION ALL
    SELECT (SELECT s.epochs[1] FROM rlmm_segments s
            WHERE s.topic_id = @topic_id::uuid AND s.partition = @partition::integer
              AND s.finished_version IS NOT NULL AND cardinality(s.epochs) = 1
              AND s.epochs[1] > single_epochs.epoch
            ORDER BY s.epochs[1] LIMIT 1)
    FROM single_epochs
    WHERE single_epochs.epoch IS NOT NULL
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
    SELECT single_epochs.epoch,
        (SELECT s.end_offset FROM rlmm_segments s
         WHERE s.topic_id = @topic_id::uuid AND s.partition = @partition::integer
           AND s.finished_version IS NOT NULL AND cardinality(s.epochs) = 1
           AND s.epochs[1] = single_epochs.epoch
         ORDER BY s.end_offset DESC LIMIT 1) AS end_offset
    FROM single_epochs
    WHERE single_epochs.epoch IS NOT NULL
    UNION ALL
    SELECT ee.epoch, ee.end_offset FROM rlmm_epoch_ends ee
    WHERE ee.topic_id = @topic_id::uuid AND ee.partition = @partition::integer
) AS x
GROUP BY x.epoch;
