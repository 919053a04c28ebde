-- Purging (purge.go): what is forgotten is deleted once it has been
-- forgotten for @older_than_us microseconds, on the database's clock. A
-- segment is forgotten since its row's updated_at when it is in
-- DELETE_SEGMENT_FINISHED (the write that put it there, or a retry of it),
-- and since its partition row's updated_at when the partition is in
-- DELETE_PARTITION_FINISHED (no write changes such a partition but a retry of
-- that state). Each statement is one bounded batch, and takes every row lock
-- with SKIP LOCKED: a purge never waits on a broker's write or on another
-- purge, and two purges never pick the same row. Every segment deleted takes
-- its epoch rows with it (the trigger rlmm_segments_forget_epochs), and
-- marks its partition's vanished_version (the trigger rlmm_segments_vanished
-- of migration 00010), which tells caches behind it to reload the partition
-- rather than catch up (pgcache.go).

-- name: PurgeForgottenSegments :one
-- Up to @batch_size segments in DELETE_SEGMENT_FINISHED, oldest first, from
-- the front of rlmm_segments_forgotten_idx. A segment whose partition row a
-- writer holds is left for the next batch.
WITH candidates AS MATERIALIZED (
    SELECT s.topic_id, s.partition, s.segment_id
    FROM rlmm_segments s
    WHERE s.state = 3 /* DELETE_SEGMENT_FINISHED */
      AND s.updated_at <= now() - (sqlc.arg('older_than_us')::bigint * interval '1 microsecond')
    ORDER BY s.updated_at
    LIMIT @batch_size::integer
    FOR UPDATE SKIP LOCKED
), locked_partitions AS MATERIALIZED (
    SELECT p.topic_id, p.partition
    FROM rlmm_partitions p
    WHERE (p.topic_id, p.partition) IN (SELECT c.topic_id, c.partition FROM candidates c)
    FOR UPDATE SKIP LOCKED
), deleted AS (
    DELETE FROM rlmm_segments s
    USING candidates c, locked_partitions lp
    WHERE lp.topic_id = c.topic_id AND lp.partition = c.partition
      AND s.segment_id = c.segment_id AND (s.topic_id = c.topic_id AND s.partition = c.partition) IS TRUE
    RETURNING s.topic_id, s.partition, s.last_version
)
SELECT count(*)::bigint AS segments FROM deleted;

-- name: PurgeDeletedPartitionSegments :one
-- Up to @batch_size segments, in any state, of partitions whose delete
-- finished (rlmm_partitions_deleted_idx), each partition read by the
-- primary key's prefix.
WITH locked_partitions AS MATERIALIZED (
    SELECT p.topic_id, p.partition, p.version
    FROM rlmm_partitions p
    WHERE p.delete_state = 2 /* DELETE_PARTITION_FINISHED */
      AND p.updated_at <= now() - (sqlc.arg('older_than_us')::bigint * interval '1 microsecond')
      AND EXISTS (SELECT 1 FROM rlmm_segments s WHERE s.topic_id = p.topic_id AND s.partition = p.partition)
    LIMIT @batch_size::integer
    FOR UPDATE SKIP LOCKED
), victims AS MATERIALIZED (
    SELECT s.topic_id, s.partition, s.segment_id
    FROM locked_partitions lp
    JOIN rlmm_segments s ON s.topic_id = lp.topic_id AND s.partition = lp.partition
    LIMIT @batch_size::integer
    FOR UPDATE OF s SKIP LOCKED
), deleted AS (
    DELETE FROM rlmm_segments s
    USING victims v
    WHERE s.segment_id = v.segment_id AND (s.topic_id = v.topic_id AND s.partition = v.partition) IS TRUE
    RETURNING s.topic_id, s.partition
)
SELECT count(*)::bigint AS segments FROM deleted;

-- name: PurgeDeletedPartitions :many
-- Takes the delete record of up to @batch_size partitions whose delete
-- finished and that have no segment left: adds work again. The row stays,
-- so that its version keeps growing (CaughtUp and the caches compare it);
-- the write bumps it, stamps purged_version with it (which the delete guard
-- of migration 00011 requires of this one write), and deletes the
-- partition's epoch ends, which its delete had hidden.
WITH cleared AS (
    UPDATE rlmm_partitions p
    SET version = p.version + 1,
        purged_version = p.version + 1,
        delete_state = NULL,
        delete_broker_id = NULL,
        delete_event_timestamp_ms = NULL,
        max_epoch_span = 0,
        updated_at = now()
    FROM (SELECT q.topic_id, q.partition
          FROM rlmm_partitions q
          WHERE q.delete_state = 2 /* DELETE_PARTITION_FINISHED */
            AND q.updated_at <= now() - (sqlc.arg('older_than_us')::bigint * interval '1 microsecond')
            AND NOT EXISTS (SELECT 1 FROM rlmm_segments s WHERE s.topic_id = q.topic_id AND s.partition = q.partition)
          LIMIT @batch_size::integer
          FOR UPDATE SKIP LOCKED) c
    WHERE p.topic_id = c.topic_id AND p.partition = c.partition
    RETURNING p.topic_id, p.partition, p.topic, p.version
), ends AS (
    DELETE FROM rlmm_epoch_ends ee
    USING cleared c
    WHERE ee.topic_id = c.topic_id AND ee.partition = c.partition
)
SELECT c.topic_id, c.partition, c.topic, c.version FROM cleared c;
