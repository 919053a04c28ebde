-- FirstSegmentForTimestamp and EpochEndOffset. rlmm_epoch_ends is
-- raised by SegmentUpdate's epoch_ends CTE (queries/segments.sql) and by
-- rlmm_set_segment_state's COPY_SEGMENT_FINISHED.

-- name: SegmentFirstForTimestamp :one
-- The first finished segment carrying @epoch, in list order (start offset,
-- then added version), whose end offset >= @starting_offset and whose
-- max_timestamp_ms >= @timestamp_ms. A walk of the epoch's rows in
-- rlmm_segment_epochs_list_idx, which is in list order, filtered on the
-- copies each row carries (max_timestamp_ms), then the segment by its id,
-- from start offset @starting_offset - max_segment_span (rlmm_epoch_ends,
-- by primary key: no finished segment carrying the epoch is longer, so none
-- starting earlier reaches @starting_offset; no row: no finished segment
-- ever carried the epoch, and the walk is empty).
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
          SELECT ee.max_segment_span FROM rlmm_epoch_ends ee
          WHERE ee.topic_id = @topic_id::uuid AND ee.partition = @partition::integer AND ee.epoch = @epoch::integer)
      AND e.segment_end_offset >= @starting_offset::bigint
      AND e.max_timestamp_ms >= @timestamp_ms::bigint
    ORDER BY e.segment_start_offset, e.added_version
    LIMIT 1)
  AND (s.topic_id = @topic_id::uuid AND s.partition = @partition::integer) IS TRUE
  AND NOT EXISTS (SELECT 1 FROM rlmm_partitions p
                  WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer AND p.delete_state = 2 /* DELETE_PARTITION_FINISHED */);

-- name: EpochEndOffset :one
-- Kafka's highest offset for @epoch: the high-water mark of the epoch's
-- range ends over the segments that reached COPY_SEGMENT_FINISHED. None once
-- the partition's delete finished.
SELECT ee.end_offset
FROM rlmm_epoch_ends ee
WHERE ee.topic_id = @topic_id::uuid AND ee.partition = @partition::integer AND ee.epoch = @epoch::integer
  AND NOT EXISTS (SELECT 1 FROM rlmm_partitions p
                  WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer AND p.delete_state = 2 /* DELETE_PARTITION_FINISHED */);

-- name: EpochEndsChanged :many
-- The partition's epoch ends raised after @after_version, for the cache's
-- catch-up (read in the same snapshot as PartitionChanges).
SELECT ee.epoch, ee.end_offset
FROM rlmm_epoch_ends ee
WHERE ee.topic_id = @topic_id::uuid AND ee.partition = @partition::integer
  AND ee.raised_version > @after_version::bigint;
