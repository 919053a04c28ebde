-- name: PrimaryPosition :one
-- Where the primary's WAL is. CaughtUp's round trip when the manager reads
-- from the primary: the answer shows that the store answers, and nothing
-- compares the position (a replica's CaughtUp reads ReplicaSnapshot and
-- PartitionReplicaBehind).
SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint AS position;

-- name: ReplicaSnapshot :one
-- CaughtUp's read on a replica (WithReadReplica), before the primary's, in
-- one statement (one snapshot): the snapshot; the transaction ids of tp's
-- segment rows it sees written between its xmin and its xmax (usually
-- none); tp's delete_version (0: no row) and the data's generation.
-- PartitionReplicaBehind compares them with the primary's. Every
-- transaction below the xmin had ended when the snapshot was taken (on a
-- hot standby: its commit or abort replayed), and none at or past the xmax
-- had committed. Between the two, a hot standby's pg_current_snapshot()
-- lists no running transaction (in recovery PostgreSQL keeps them all with
-- the subtransactions, which it does not export): so what the snapshot saw
-- there is read from the rows themselves. One primary-key probe and one
-- range of rlmm_segments_changes_idx: the writes to tp since the oldest
-- transaction running then began. As text: see PartitionsBehind.
SELECT snap.snapshot::text AS snapshot,
    coalesce((SELECT array_agg(DISTINCT s.last_xid::text) FROM rlmm_segments s
              WHERE s.topic_id = @topic_id::uuid AND s.partition = @partition::integer
                AND s.last_xid >= pg_snapshot_xmin(snap.snapshot) AND s.last_xid < pg_snapshot_xmax(snap.snapshot)),
             '{}')::text[] AS seen,
    coalesce((SELECT p.delete_version FROM rlmm_partitions p
              WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer), 0)::bigint AS delete_version,
    (SELECT coalesce(max(g.generation), 0) FROM rlmm_data_generation g)::bigint AS generation
FROM (SELECT pg_current_snapshot() AS snapshot) AS snap;

-- name: PartitionReplicaBehind :one
-- CaughtUp's read on the primary, after ReplicaSnapshot on the replica:
-- whether tp has a write committed here that the replica's @snapshot did
-- not see. That is a segment row of tp whose last_xid is at or past the
-- snapshot's xmax, or between its xmin and xmax and not one of those it
-- saw (@seen): a write the replica had not replayed (a write overwritten
-- since left a later one in its place, which the snapshot did not see
-- either: a partition's writes commit in the order of its row's lock);
-- another delete_version (a partition-delete write); rows purged whose last
-- write the snapshot may not have seen (vanished_xid at or past its xmin,
-- as PartitionsBehind); or another generation (rlmm_resync(), which a DBA
-- runs after raw DML). One primary-key probe and two descents of
-- rlmm_segments_changes_idx, as PartitionsBehind, the second reading the
-- rows between xmin and xmax until one not seen.
SELECT (coalesce(p.delete_version, 0) <> @delete_version::bigint
     OR coalesce(p.vanished_xid >= pg_snapshot_xmin((@snapshot::text)::pg_snapshot), false)
     OR (SELECT coalesce(max(g.generation), 0) FROM rlmm_data_generation g) <> @generation::bigint
     OR (SELECT s.last_xid FROM rlmm_segments s
         WHERE s.topic_id = @topic_id::uuid AND s.partition = @partition::integer
           AND s.last_xid >= pg_snapshot_xmax((@snapshot::text)::pg_snapshot)
         ORDER BY s.last_xid LIMIT 1) IS NOT NULL
     OR (SELECT s.last_xid FROM rlmm_segments s
         WHERE s.topic_id = @topic_id::uuid AND s.partition = @partition::integer
           AND s.last_xid >= pg_snapshot_xmin((@snapshot::text)::pg_snapshot)
           AND s.last_xid < pg_snapshot_xmax((@snapshot::text)::pg_snapshot)
           AND s.last_xid <> ALL((@seen::text[])::xid8[])
         ORDER BY s.last_xid LIMIT 1) IS NOT NULL)::boolean AS behind
FROM (SELECT 1) AS one
LEFT JOIN rlmm_partitions p ON p.topic_id = @topic_id::uuid AND p.partition = @partition::integer;

-- name: PartitionCacheCheck :one
-- What CaughtUp of a cached partition compares, in one snapshot: the
-- partition's delete_version and vanished_xid, the data's generation, and
-- each segment written since the cache's snapshot @after (the rows whose
-- last_xid it does not see: see PartitionCatchUp), by id and last_version.
-- The cache is caught up when it holds each such write already (its own,
-- applied when made).
SELECT coalesce(p.delete_version, 0)::bigint AS delete_version,
    p.vanished_xid AS vanished_xid,
    (SELECT coalesce(max(g.generation), 0) FROM rlmm_data_generation g)::bigint AS generation,
    coalesce(c.segment_ids, '{}')::uuid[] AS segment_ids,
    coalesce(c.last_versions, '{}')::bigint[] AS last_versions
FROM (SELECT 1) AS one
LEFT JOIN rlmm_partitions p ON p.topic_id = @topic_id::uuid AND p.partition = @partition::integer
CROSS JOIN LATERAL (
    SELECT array_agg(s.segment_id) AS segment_ids, array_agg(s.last_version) AS last_versions
    FROM (SELECT s.segment_id, s.last_version FROM rlmm_segments s
          WHERE s.topic_id = @topic_id::uuid AND s.partition = @partition::integer
            AND s.last_xid >= pg_snapshot_xmax((@after::text)::pg_snapshot)
          UNION ALL
          SELECT s.segment_id, s.last_version
          FROM pg_snapshot_xip((@after::text)::pg_snapshot) AS x (xid)
          CROSS JOIN LATERAL (
              SELECT s.segment_id, s.last_version FROM rlmm_segments s
              WHERE s.topic_id = @topic_id::uuid AND s.partition = @partition::integer AND s.last_xid = x.xid
              OFFSET 0) AS s) AS s
) AS c;

-- name: DataGeneration :one
-- The data's generation: bumped by rlmm_resync(), which a DBA runs after
-- raw DML. 0: the row is gone. With the snapshot it was read in, for a
-- cache's load.
SELECT coalesce(max(g.generation), 0)::bigint AS generation, pg_current_snapshot()::text AS snapshot
FROM rlmm_data_generation g;

-- name: PartitionGet :one
SELECT * FROM rlmm_partitions
WHERE topic_id = @topic_id::uuid AND partition = @partition::integer;

-- name: PartitionDeleteUpsert :one
-- A partition-delete transition that a partition with no record may make
-- too: creates the partition row when there is none. @allowed holds the
-- stored states it may come from, -1 standing for "no record". The row is
-- locked FOR UPDATE first, so that the segments' writes in flight commit
-- before it and those that follow see the change; the write order is taken
-- under that lock. ON CONFLICT decides on the newest row, the one locked.
-- delete_version is -1 when refused; found_state is then the state the
-- lock found (-1: no record), or -2 when this statement's snapshot did not
-- see the row, which a concurrent first write created.
WITH locked AS MATERIALIZED (
    SELECT p.delete_state FROM rlmm_partitions p
    WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer
    FOR UPDATE
), write_order AS MATERIALIZED (
    SELECT nextval('rlmm_versions') AS version FROM (SELECT count(*) FROM locked) AS after_the_lock
), upserted AS (
    INSERT INTO rlmm_partitions AS p
        (topic_id, partition, topic, delete_version, delete_state, delete_broker_id, delete_event_timestamp_ms)
    SELECT @topic_id::uuid, @partition::integer, @topic::text, w.version, @state::smallint, @broker_id::integer, @event_timestamp_ms::bigint
    FROM write_order w
    ON CONFLICT (topic_id, partition) DO UPDATE
    SET delete_version = excluded.delete_version,
        delete_state = excluded.delete_state,
        delete_broker_id = excluded.delete_broker_id,
        delete_event_timestamp_ms = excluded.delete_event_timestamp_ms,
        updated_at = now()
    WHERE coalesce(p.delete_state, -1) = ANY(@allowed::smallint[])
    RETURNING p.delete_version
)
SELECT coalesce((SELECT u.delete_version FROM upserted u), -1)::bigint AS delete_version,
    coalesce((SELECT coalesce(l.delete_state, -1) FROM locked l), -2)::smallint AS found_state,
    pg_current_xact_id() AS xid;

-- name: PartitionDeleteUpdate :one
-- A partition-delete transition that needs an existing record in one of
-- the @allowed states, under the lock PartitionDeleteUpsert takes. The lock
-- reads the newest row, whatever this statement's snapshot saw, and the
-- UPDATE is decided on the state it found: a writer that moved the record
-- while this one waited is seen. (Filtering the locked read on the state
-- would test the snapshot's row, and skip it without waiting.)
-- delete_version is -1 when refused; found_state then says in which state
-- the lock found the record (-1: none, or no partition row).
WITH locked AS MATERIALIZED (
    SELECT p.delete_state FROM rlmm_partitions p
    WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer
    FOR UPDATE
), updated AS (
    UPDATE rlmm_partitions AS p
    SET delete_version = nextval('rlmm_versions'),
        delete_state = @state::smallint,
        delete_broker_id = @broker_id::integer,
        delete_event_timestamp_ms = @event_timestamp_ms::bigint,
        updated_at = now()
    FROM locked l
    WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer
      AND coalesce(l.delete_state, -1) = ANY(@allowed::smallint[])
    RETURNING p.delete_version
)
SELECT coalesce((SELECT u.delete_version FROM updated u), -1)::bigint AS delete_version,
    coalesce((SELECT l.delete_state FROM locked l), -1)::smallint AS found_state,
    pg_current_xact_id() AS xid;

-- name: PartitionsBehind :many
-- For each of several cached partitions, given the snapshot its cache last
-- read in and the delete_version it holds, whether it has a write the cache
-- may not hold: a segment written since (a row whose last_xid the snapshot
-- does not see), another delete_version, or rows purged that the snapshot
-- may not have seen forgotten (vanished_xid); for the caches' periodic
-- poll, with the data's generation (read once). One primary-key probe and
-- two descents of rlmm_segments_changes_idx per partition (see
-- PartitionCatchUp), whatever the statistics say. The topic ids come as text: behind PgBouncer the
-- DSN sets default_query_exec_mode=exec, where pgx encodes parameters
-- without knowing their types, and it has no text encoding for a slice of
-- uuid.UUID.
SELECT ((@topic_ids::text[])[i])::uuid AS topic_id, (@partitions::integer[])[i]::integer AS partition,
    (coalesce(p.delete_version, 0) <> (@delete_versions::bigint[])[i]
     OR coalesce(p.vanished_xid >= pg_snapshot_xmin(((@snapshots::text[])[i])::pg_snapshot), false)
     OR (SELECT s.last_xid FROM rlmm_segments s
         WHERE s.topic_id = ((@topic_ids::text[])[i])::uuid AND s.partition = (@partitions::integer[])[i]
           AND s.last_xid >= pg_snapshot_xmax(((@snapshots::text[])[i])::pg_snapshot)
         ORDER BY s.last_xid LIMIT 1) IS NOT NULL
     OR EXISTS (SELECT 1 FROM pg_snapshot_xip(((@snapshots::text[])[i])::pg_snapshot) AS x (xid)
                CROSS JOIN LATERAL (
                    SELECT 1 FROM rlmm_segments s
                    WHERE s.topic_id = ((@topic_ids::text[])[i])::uuid AND s.partition = (@partitions::integer[])[i]
                      AND s.last_xid = x.xid
                    OFFSET 0) AS s))::boolean AS behind,
    (SELECT coalesce(max(g.generation), 0) FROM rlmm_data_generation g)::bigint AS generation
FROM generate_subscripts(@topic_ids::text[], 1) AS i
LEFT JOIN LATERAL (
    SELECT p.delete_version, p.vanished_xid FROM rlmm_partitions p
    WHERE p.topic_id = ((@topic_ids::text[])[i])::uuid AND p.partition = (@partitions::integer[])[i]
    LIMIT 1
) AS p ON true;

-- name: PartitionCatchUp :many
-- PartitionChanges and PartitionGet in one statement (one statement, one
-- snapshot: no transaction, one round trip), for the cache's catch-up: each
-- segment written since the snapshot @after the cache last read in, with
-- the partition's delete record and the statement's own snapshot, the
-- cache's next, repeated on every row (a catch-up brings a few rows). The
-- rows a snapshot does not see are those whose last_xid is at or past its
-- xmax, or one of the transactions it saw running (its xip): one range and
-- a few probes of rlmm_segments_changes_idx, however old the oldest
-- running transaction. No row: no segment changed; the cache then reads
-- both in one transaction, since the partition row may have moved alone (a
-- partition delete). The partition's vanished_xid and the data's
-- generation tell the cache when rows vanished that the feed cannot show (a
-- purge, a DBA's DELETE or TRUNCATE). The epoch ends need no feed: the
-- cache raises them from each finished segment it is given.
WITH head AS MATERIALIZED (
    -- Read once, whatever the join order: the partition row by its key.
    SELECT p.delete_state, p.delete_version, p.vanished_xid,
        (SELECT coalesce(max(g.generation), 0) FROM rlmm_data_generation g)::bigint AS generation,
        pg_current_snapshot()::text AS snapshot
    FROM rlmm_partitions p
    WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer
)
SELECT sqlc.embed(s), head.delete_state AS partition_delete_state, head.delete_version AS partition_delete_version,
    head.vanished_xid AS partition_vanished_xid, head.generation AS data_generation, head.snapshot AS snapshot
FROM head
JOIN rlmm_segments s ON s.topic_id = @topic_id::uuid AND s.partition = @partition::integer
 AND s.last_xid >= pg_snapshot_xmax((@after::text)::pg_snapshot)
UNION ALL
SELECT sqlc.embed(s), head.delete_state, head.delete_version, head.vanished_xid, head.generation, head.snapshot
FROM head
CROSS JOIN pg_snapshot_xip((@after::text)::pg_snapshot) AS x (xid)
CROSS JOIN LATERAL (
    -- One probe per transaction: a nested loop whatever the statistics.
    SELECT c.segment_id FROM rlmm_segments c
    WHERE c.topic_id = @topic_id::uuid AND c.partition = @partition::integer AND c.last_xid = x.xid
    OFFSET 0) AS c
JOIN rlmm_segments s ON s.segment_id = c.segment_id;

-- name: PartitionChanges :many
-- The segments of a partition written since the snapshot @after (see
-- PartitionCatchUp), with the epoch-map and version columns a cache needs.
-- Read in the same snapshot as PartitionGet, they bring a cache from @after
-- to that snapshot without a gap.
SELECT sqlc.embed(s)
FROM rlmm_segments s
WHERE s.topic_id = @topic_id::uuid AND s.partition = @partition::integer
  AND s.last_xid >= pg_snapshot_xmax((@after::text)::pg_snapshot)
UNION ALL
SELECT sqlc.embed(s)
FROM pg_snapshot_xip((@after::text)::pg_snapshot) AS x (xid)
CROSS JOIN LATERAL (
    SELECT c.segment_id FROM rlmm_segments c
    WHERE c.topic_id = @topic_id::uuid AND c.partition = @partition::integer AND c.last_xid = x.xid
    OFFSET 0) AS c
JOIN rlmm_segments s ON s.segment_id = c.segment_id;

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
