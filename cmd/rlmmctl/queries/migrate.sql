-- name: RelationExists :one
-- Whether a table of that name (quoted where needed) is on the search path.
-- These statements run on a database of any version, so each table is
-- looked for before it is read.
SELECT (to_regclass(@name::text) IS NOT NULL)::boolean AS exists;

-- name: PartitionRowCount :one
-- The rows a rollback of the baseline would drop, table by table.
SELECT count(*) FROM rlmm_partitions;

-- name: SegmentRowCount :one
SELECT count(*) FROM rlmm_segments;
