-- Issue 13: FirstSegmentForTimestamp and EpochEndOffset. rlmm_epoch_ends is
-- raised by SegmentUpdate's epoch_ends CTE (queries/segments.sql) and by the
-- guard trigger of a manual COPY_SEGMENT_FINISHED (migrations/00004).

-- name: SegmentFirstForTimestamp :one
-- The first finished segment carrying @epoch, in list order (start offset,
-- then added version), whose end offset >= @starting_offset and whose
-- max_timestamp_ms >= @timestamp_ms. Shaped so that the plan does not depend
-- on statistics: scalar subqueries on unique keys and one ordered index walk.
-- - The walk starts at start offsets >= @starting_offset - max_segment_span
--   (rlmm_epoch_ends, by primary key: no finished segment carrying the epoch
--   is longer, so none starting earlier reaches @starting_offset; no row: no
--   finished segment ever carried the epoch, and the walk is empty).
-- - It goes in list order on rlmm_segment_epochs_list_idx (ORDER BY ... LIMIT
--   1 on the index's own order), and reads max_timestamp_ms by the unique
--   segment id only for the candidates that pass the offset filter.
-- - The answer is fetched by its unique segment id.
SELECT sqlc.embed(s)
FROM rlmm_segments s
WHERE s.segment_id = (
    SELECT e.segment_id
    FROM rlmm_segment_epochs e
    WHERE e.topic_id = @topic_id::uuid AND e.partition = @partition::integer AND e.epoch = @epoch::integer
      -- The walk must follow rlmm_segment_epochs_list_idx (state IN (0, 1,
      -- 2)) in its order: "state::integer = 1" keeps the planner from
      -- proving the predicate of the state = 1 indexes, which, analyzed,
      -- it preferred, reading the whole epoch and sorting it.
      AND e.state IN (0, 1, 2) AND e.state::integer = 1
      AND e.segment_start_offset >= (@starting_offset::bigint) - (
          SELECT ee.max_segment_span FROM rlmm_epoch_ends ee
          WHERE ee.topic_id = @topic_id::uuid AND ee.partition = @partition::integer AND ee.epoch = @epoch::integer)
      AND e.segment_end_offset >= @starting_offset::bigint
      AND (SELECT cs.max_timestamp_ms FROM rlmm_segments cs WHERE cs.segment_id = e.segment_id) >= @timestamp_ms::bigint
    ORDER BY e.segment_start_offset, e.added_version
    LIMIT 1)
  AND NOT EXISTS (SELECT 1 FROM rlmm_partitions p
                  WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer AND p.delete_state = 2);

-- name: EpochEndOffset :one
-- Kafka's highest offset for @epoch: the high-water mark of the epoch's
-- range ends over the segments that reached COPY_SEGMENT_FINISHED. None once
-- the partition's delete finished.
SELECT ee.end_offset
FROM rlmm_epoch_ends ee
WHERE ee.topic_id = @topic_id::uuid AND ee.partition = @partition::integer AND ee.epoch = @epoch::integer
  AND NOT EXISTS (SELECT 1 FROM rlmm_partitions p
                  WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer AND p.delete_state = 2);

-- name: EpochEndsChanged :many
-- The partition's epoch ends raised after @after_version, for the cache's
-- catch-up (read in the same snapshot as PartitionChanges).
SELECT ee.epoch, ee.end_offset
FROM rlmm_epoch_ends ee
WHERE ee.topic_id = @topic_id::uuid AND ee.partition = @partition::integer
  AND ee.raised_version > @after_version::bigint;
