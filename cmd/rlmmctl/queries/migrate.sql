-- name: RelationExists :one
-- Whether a table of that name (quoted where needed) is on the search path.
-- These statements run on a database of any version, so each table is
-- looked for before it is read.
SELECT (to_regclass(@name::text) IS NOT NULL)::boolean AS exists;

-- name: EpochTablesExist :one
-- Whether the tables of migration 00004 exist.
SELECT (to_regclass('rlmm_epoch_ends') IS NOT NULL AND to_regclass('rlmm_segment_epochs') IS NOT NULL)::boolean AS exists;

-- name: RollbackLostEpochEnds :one
-- The rows of rlmm_epoch_ends that migration 00004's backfill would not
-- rebuild from the finished epoch rows still stored, and their partitions.
SELECT count(*) AS rows, count(DISTINCT (ee.topic_id, ee.partition)) AS partitions
FROM rlmm_epoch_ends ee
LEFT JOIN LATERAL (
    SELECT max(e.last_offset) AS end_offset, max(e.segment_end_offset - e.segment_start_offset) AS span
    FROM rlmm_segment_epochs e
    WHERE e.topic_id = ee.topic_id AND e.partition = ee.partition AND e.epoch = ee.epoch AND e.finished_version IS NOT NULL
) kept ON true
WHERE kept.end_offset IS NULL OR ee.end_offset > kept.end_offset OR ee.max_segment_span > kept.span;

-- name: PartitionRowCount :one
-- The rows a rollback of migration 00001 would drop, table by table.
SELECT count(*) FROM rlmm_partitions;

-- name: SegmentRowCount :one
SELECT count(*) FROM rlmm_segments;
