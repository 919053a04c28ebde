-- name: PartitionVersion :one
-- The partition's committed version: 0 for a partition never written to.
SELECT coalesce(
    (SELECT p.version FROM rlmm_partitions p
     WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer),
    0)::bigint AS version;

-- name: PartitionCacheVersion :one
-- PartitionVersion with the data's generation (rlmm_data_generation), for
-- CaughtUp of a cached partition: a cache loaded at another generation is
-- not caught up, whatever the versions say.
SELECT coalesce(
    (SELECT p.version FROM rlmm_partitions p
     WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer),
    0)::bigint AS version,
    (SELECT coalesce(max(g.generation), 0) FROM rlmm_data_generation g)::bigint AS generation;

-- name: DataGeneration :one
-- The data's generation: bumped by rlmm_resync(), which a DBA runs after
-- raw DML. 0: the row is gone.
SELECT coalesce(max(g.generation), 0)::bigint AS generation FROM rlmm_data_generation g;

-- name: PartitionGet :one
SELECT * FROM rlmm_partitions
WHERE topic_id = @topic_id::uuid AND partition = @partition::integer;

-- name: PartitionDeleteUpsert :one
-- A partition-delete transition that a partition with no record may make
-- too: creates the partition row when there is none. @allowed holds the
-- stored states it may come from, -1 standing for "no record".
INSERT INTO rlmm_partitions AS p
    (topic_id, partition, topic, version, delete_state, delete_broker_id, delete_event_timestamp_ms)
VALUES
    (@topic_id::uuid, @partition::integer, @topic::text, 1, @state::smallint, @broker_id::integer, @event_timestamp_ms::bigint)
ON CONFLICT (topic_id, partition) DO UPDATE
SET version = p.version + 1,
    delete_state = excluded.delete_state,
    delete_broker_id = excluded.delete_broker_id,
    delete_event_timestamp_ms = excluded.delete_event_timestamp_ms,
    updated_at = now()
WHERE coalesce(p.delete_state, -1) = ANY(@allowed::smallint[])
RETURNING p.version;

-- name: PartitionDeleteUpdate :one
-- A partition-delete transition that needs an existing record in one of
-- the @allowed states.
UPDATE rlmm_partitions AS p
SET version = p.version + 1,
    delete_state = @state::smallint,
    delete_broker_id = @broker_id::integer,
    delete_event_timestamp_ms = @event_timestamp_ms::bigint,
    updated_at = now()
WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer
  AND coalesce(p.delete_state, -1) = ANY(@allowed::smallint[])
RETURNING p.version;

-- name: PartitionVersions :many
-- The committed versions of several partitions (0: never written to), for
-- the caches' periodic version poll, with the data's generation
-- (rlmm_data_generation, read once): one primary-key probe per partition
-- (LATERAL … LIMIT 1, whatever the statistics say). The topic ids come as
-- text: behind PgBouncer the DSN sets default_query_exec_mode=exec, where
-- pgx encodes parameters without knowing their types, and it has no text
-- encoding for a slice of uuid.UUID.
SELECT ((@topic_ids::text[])[i])::uuid AS topic_id, (@partitions::integer[])[i]::integer AS partition,
    coalesce(v.version, 0)::bigint AS version,
    (SELECT coalesce(max(g.generation), 0) FROM rlmm_data_generation g)::bigint AS generation
FROM generate_subscripts(@topic_ids::text[], 1) AS i
LEFT JOIN LATERAL (
    SELECT p.version FROM rlmm_partitions p
    WHERE p.topic_id = ((@topic_ids::text[])[i])::uuid AND p.partition = (@partitions::integer[])[i]
    LIMIT 1
) AS v ON true;

-- name: PartitionCatchUp :many
-- PartitionChanges and PartitionGet in one statement (one statement, one
-- snapshot: no transaction, one round trip), for the cache's catch-up: each
-- segment written after @after_version, with the partition's version and
-- delete state repeated on every row (a catch-up brings a few rows). No
-- row: no segment changed; the cache then reads both in one transaction,
-- since the partition row may have moved alone (a partition delete). The
-- partition's vanished_version and the data's generation tell the cache when
-- rows vanished that the feed cannot show (a purge, a DBA's DELETE or
-- TRUNCATE). The epoch ends need no feed: the cache raises them from each
-- finished segment it is given.
WITH head AS MATERIALIZED (
    -- Read once, whatever the join order: the partition row by its key.
    SELECT p.version, p.delete_state, p.vanished_version,
        (SELECT coalesce(max(g.generation), 0) FROM rlmm_data_generation g)::bigint AS generation
    FROM rlmm_partitions p
    WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer
)
SELECT sqlc.embed(s), head.version AS partition_version, head.delete_state AS partition_delete_state,
    head.vanished_version AS partition_vanished_version, head.generation AS data_generation
FROM head
JOIN rlmm_segments s ON s.topic_id = @topic_id::uuid AND s.partition = @partition::integer
 AND s.last_version > @after_version::bigint
ORDER BY s.last_version;

-- name: PartitionChanges :many
-- The segments of a partition written after version @after_version, with the
-- epoch-map and version columns a cache needs. Read in the same snapshot as
-- PartitionGet, they bring a cache from @after_version to the partition's
-- version without a gap.
SELECT sqlc.embed(s)
FROM rlmm_segments s
WHERE s.topic_id = @topic_id::uuid AND s.partition = @partition::integer
  AND s.last_version > @after_version::bigint
ORDER BY s.last_version;

-- name: PartitionLoad :many
-- A cache's load: every segment of the partition that is not forgotten, with
-- the versions a cache keeps, read as SegmentList reads them (one range of
-- rlmm_segments_list_idx) in the same snapshot as PartitionGet.
SELECT sqlc.embed(s)
FROM rlmm_segments s
WHERE s.topic_id = @topic_id::uuid AND s.partition = @partition::integer
  AND s.state IN (0, 1, 2) /* COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED */
  AND NOT EXISTS (SELECT 1 FROM rlmm_partitions p
                  WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer AND p.delete_state = 2 /* DELETE_PARTITION_FINISHED */)
ORDER BY s.start_offset, s.added_version;
