-- Purging (purge.go): what is forgotten is deleted once it has been
-- forgotten for @older_than_us microseconds, on the database's clock. A
-- segment is forgotten since its row's updated_at when it is in
-- DELETE_SEGMENT_FINISHED (the write that put it there, or a retry of it),
-- and since its partition row's updated_at when the partition is in
-- DELETE_PARTITION_FINISHED (no write changes such a partition but a retry of
-- that state). The statements are those of the function rlmm_purge_round
-- (migrations/), which DBAs call from psql too (rlmm_purge): each round is
-- bounded by @batch_size, and takes every row lock with SKIP LOCKED, so a
-- purge never waits on a broker's write or on another purge, and two
-- purges never pick the same row. Every segment deleted takes its epoch
-- rows with it (the foreign key's ON DELETE CASCADE), and marks its
-- partition's vanished_xid, which tells caches whose snapshot may not see
-- it to reload the partition rather than catch up (internal/cache).

-- name: PurgeRound :one
-- One round: the segments deleted, and the partitions whose delete record
-- it took (adds work again), with their new delete_version; and the
-- round's transaction id.
SELECT r.segments::bigint AS segments, r.topic_ids::uuid[] AS topic_ids, r.partitions::integer[] AS partitions,
       r.topics::text[] AS topics, r.versions::bigint[] AS versions, pg_current_xact_id() AS xid
FROM rlmm_purge_round(sqlc.arg('older_than_us')::bigint * interval '1 microsecond', @batch_size::integer) AS r;
