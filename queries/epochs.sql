-- Issue 13: FirstSegmentForTimestamp and EpochEndOffset. rlmm_epoch_ends is
-- raised by SegmentUpdate's epoch_ends CTE (queries/segments.sql) and by the
-- guard trigger of a manual COPY_SEGMENT_FINISHED (migrations/00004).

-- name: SegmentFirstForTimestamp :one
-- The first finished segment carrying @epoch, in list order (start offset,
-- then added version), whose end offset >= @starting_offset and whose
-- max_timestamp_ms >= @timestamp_ms. The walk starts at start offsets >=
-- @starting_offset - max_segment_span (no finished segment carrying the
-- epoch is longer, so none starting earlier can reach @starting_offset) on
-- rlmm_segment_epochs_timestamp_idx, and fetches a segment row (by primary
-- key) only for the candidates that pass the offset filter. The epoch's
-- rlmm_epoch_ends row (primary key) gives the bound; no row: no finished
-- segment ever carried the epoch.
SELECT sqlc.embed(s)
FROM rlmm_epoch_ends ee
CROSS JOIN LATERAL (
    SELECT e.segment_id
    FROM rlmm_segment_epochs e
    JOIN rlmm_segments cs ON cs.topic_id = e.topic_id AND cs.partition = e.partition AND cs.segment_id = e.segment_id
    WHERE e.topic_id = ee.topic_id AND e.partition = ee.partition AND e.epoch = ee.epoch
      AND e.state = 1
      AND e.segment_start_offset >= (@starting_offset::bigint) - ee.max_segment_span
      AND e.segment_end_offset >= @starting_offset::bigint
      AND cs.max_timestamp_ms >= @timestamp_ms::bigint
    ORDER BY e.segment_start_offset, e.added_version
    LIMIT 1
) AS c
JOIN rlmm_segments s ON s.topic_id = ee.topic_id AND s.partition = ee.partition AND s.segment_id = c.segment_id
WHERE ee.topic_id = @topic_id::uuid AND ee.partition = @partition::integer AND ee.epoch = @epoch::integer
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
