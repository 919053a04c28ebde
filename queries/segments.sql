-- The statements on segments. Each leaves the planner one reasonable plan
-- whatever its statistics say (a table never analyzed, or analyzed when it
-- was 100 times smaller: pgmanager_plan_test.go measures all three states):
--   - a segment is fetched by its id, with the partition check hidden from
--     index matching: "seg.segment_id = X AND (seg.topic_id = T AND
--     seg.partition = P) IS TRUE". Only rlmm_segments_segment_id_key can
--     answer that. Spelled as plain equalities, a never-analyzed table let
--     the planner prefer an index on (topic_id, partition) alone and read
--     the whole partition to find one id, because it multiplies two default
--     selectivities into "4 rows in the partition";
--   - an answer that is one row of an index comes from ORDER BY … LIMIT 1
--     in a sub-select or LATERAL, evaluated before the rows it selects;
--   - lists read one index range in list order;
--   - "the segment carries @epoch" is two sources: a segment of one epoch
--     matches "epochs[1] = @epoch AND cardinality(epochs) = 1", spelled so
--     that rlmm_segments_epoch_*_idx answer it, and a segment spanning
--     several has a row in rlmm_segment_epochs for each.

-- The reads that answer with segments select the API's columns, in one
-- order: those RemoteLogSegmentMetadata carries and added_version (the list
-- key of the streaming pages), not the versions and timestamps the caches
-- and operators read. sqlc gives each such query a row type with the fields
-- of the library's apiRow (rows.go), which the compiler holds them to; the
-- lists scan straight into the public type (rows.go says why).

-- name: SegmentAdd :one
-- Adds a segment in one statement: locks the partition row FOR NO KEY
-- UPDATE (creating it for the partition's first segment), unless the
-- partition has a delete record, widens its max_segment_span to the
-- segment's end - start when that is larger, and inserts the segment,
-- stamped with a write order (rlmm_versions) taken under that lock and its
-- transaction id, and, when it spans several leader epochs, one row per
-- epoch. The lock orders a partition's writes: their write orders follow
-- their commits, so the list order (start offset, then added_version) and
-- the lookups' "finished last" are the order a reader saw them in. added_version is -1 when nothing was
-- added: delete_state then says why (-1 and no record: a concurrent first
-- add created the partition row after this statement's snapshot; try
-- again). A taken segment id fails on rlmm_segments_segment_id_key. The
-- manager notifies rlmm_changes after the commit (internal/cache/notifier.go),
-- outside this transaction.
WITH existing AS MATERIALIZED (
    SELECT p.delete_state, p.max_segment_span FROM rlmm_partitions p
    WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer
    FOR NO KEY UPDATE
), created AS (
    INSERT INTO rlmm_partitions (topic_id, partition, topic, max_segment_span)
    SELECT @topic_id::uuid, @partition::integer, @topic::text, @max_segment_span::bigint
    WHERE NOT EXISTS (SELECT 1 FROM existing)
    ON CONFLICT (topic_id, partition) DO NOTHING
    RETURNING 1 AS created
), widened AS (
    -- Only when the locked row is narrower (most adds touch nothing
    -- here), and rechecked on the newest row if another add widens it
    -- first.
    UPDATE rlmm_partitions AS p
    SET max_segment_span = @max_segment_span::bigint, updated_at = now()
    WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer
      AND p.max_segment_span < @max_segment_span::bigint
      AND EXISTS (SELECT 1 FROM existing e WHERE e.delete_state IS NULL AND e.max_segment_span < @max_segment_span::bigint)
), segment AS (
    INSERT INTO rlmm_segments (
        topic_id, partition, segment_id, topic, start_offset, end_offset,
        max_timestamp_ms, broker_id, event_timestamp_ms, segment_size_bytes,
        custom_metadata, state, txn_index_empty, epochs, epoch_start_offsets, added_version, last_version, last_xid)
    SELECT @topic_id::uuid, @partition::integer, @segment_id::uuid, @topic::text, @start_offset::bigint, @end_offset::bigint,
        @max_timestamp_ms::bigint, @broker_id::integer, @event_timestamp_ms::bigint, @segment_size_bytes::integer,
        sqlc.narg('custom_metadata')::bytea, @state::smallint, @txn_index_empty::boolean,
        @epochs::integer[], @epoch_first_offsets::bigint[], w.version, w.version, pg_current_xact_id()
    FROM (SELECT nextval('rlmm_versions') AS version
          FROM (SELECT count(*) FROM existing) AS after_the_lock) AS w
    WHERE EXISTS (SELECT 1 FROM existing e WHERE e.delete_state IS NULL) OR EXISTS (SELECT 1 FROM created)
    RETURNING added_version
), epochs AS (
    INSERT INTO rlmm_segment_epochs (
        topic_id, partition, segment_id, epoch, first_offset, last_offset, state,
        segment_start_offset, segment_end_offset, added_version, last_version, segment_size_bytes, max_timestamp_ms)
    SELECT @topic_id::uuid, @partition::integer, @segment_id::uuid,
        (@epochs::integer[])[i], (@epoch_first_offsets::bigint[])[i], (@epoch_last_offsets::bigint[])[i], @state::smallint,
        @start_offset::bigint, @end_offset::bigint, segment.added_version, segment.added_version,
        @segment_size_bytes::integer, @max_timestamp_ms::bigint
    FROM segment, generate_subscripts(@epochs::integer[], 1) AS i
    WHERE cardinality(@epochs::integer[]) > 1
)
SELECT coalesce((SELECT segment.added_version FROM segment), -1)::bigint AS added_version,
    coalesce((SELECT e.delete_state FROM existing e), -1)::smallint AS delete_state,
    pg_current_xact_id() AS xid;

-- name: SegmentUpdate :one
-- Moves a segment to @state in one statement, when its state is one of
-- @allowed (from statemachine.go) and its partition's delete has not
-- finished. The partition row is locked FOR NO KEY UPDATE first, as every
-- write locks it (SegmentAdd says why), then the segment is stamped with
-- its transaction id and a last_version above both its own and a write
-- order (rlmm_versions) taken under that lock, and the epoch rows follow.
-- updated_version is -1 when nothing changed; current_state (-1: no such
-- segment) and delete_state (-1: none) then say why: both are read after
-- the lock, so they are what a racing writer left, not what this
-- statement's snapshot saw. On success the segment's new row comes back,
-- so a cache can apply the write without reading it again.
--
-- The state filter is decided on the newest row only when the row passes
-- it as the snapshot saw it: PostgreSQL then rechecks the newest version
-- (a writer that committed while this one waited, and left a state not in
-- @allowed, makes it refuse). A row whose snapshot state fails the filter
-- is skipped without a recheck, although the writer that committed while
-- this one waited may have left it in an allowed state. current_state
-- shows that case: a refusal whose current_state is in @allowed was not
-- decided on the state after the lock, and the manager runs the statement
-- again (pgmanager.go). Each such refusal means the segment's state
-- changed in between, which happens at most three times in its life.
WITH locked_partition AS MATERIALIZED (
    SELECT p.delete_state FROM rlmm_partitions p
    WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer
    FOR NO KEY UPDATE
), segment AS (
    UPDATE rlmm_segments AS s
    SET state = @state::smallint,
        broker_id = @broker_id::integer,
        event_timestamp_ms = @event_timestamp_ms::bigint,
        custom_metadata = coalesce(sqlc.narg('custom_metadata')::bytea, s.custom_metadata),
        finished_version = CASE WHEN @finishing::boolean THEN coalesce(s.finished_version, w.version) ELSE s.finished_version END,
        last_version = greatest(s.last_version + 1, w.version),
        last_xid = pg_current_xact_id(),
        updated_at = now()
    FROM (SELECT nextval('rlmm_versions') AS version FROM locked_partition lp WHERE lp.delete_state IS DISTINCT FROM 2) AS w
    WHERE s.segment_id = @segment_id::uuid AND (s.topic_id = @topic_id::uuid AND s.partition = @partition::integer) IS TRUE
      AND s.state = ANY(@allowed::smallint[])
      -- Evaluated once, before the segment is read: the partition's lock
      -- is always taken before the segment's, as every writer takes them.
      AND EXISTS (SELECT 1 FROM locked_partition lp WHERE lp.delete_state IS DISTINCT FROM 2)
    RETURNING s.*, w.version AS write_order
), epochs AS (
    UPDATE rlmm_segment_epochs AS e
    SET state = @state::smallint, finished_version = segment.finished_version, last_version = segment.last_version
    FROM segment
    WHERE e.topic_id = @topic_id::uuid AND e.partition = @partition::integer AND e.segment_id = @segment_id::uuid
)
SELECT
    coalesce(seg.last_version, -1)::bigint AS updated_version,
    coalesce(seg.write_order, -1)::bigint AS write_order,
    pg_current_xact_id() AS xid,
    (CASE WHEN seg.last_version IS NOT NULL THEN seg.state
          ELSE coalesce((SELECT cur.state FROM rlmm_segments cur
                         WHERE cur.segment_id = @segment_id::uuid
                           AND (cur.topic_id = @topic_id::uuid AND cur.partition = @partition::integer) IS TRUE
                         FOR SHARE), -1)
     END)::smallint AS current_state,
    coalesce((SELECT lp.delete_state FROM locked_partition lp), -1)::smallint AS delete_state,
    coalesce(seg.topic, '')::text AS topic,
    coalesce(seg.start_offset, 0)::bigint AS start_offset,
    coalesce(seg.end_offset, 0)::bigint AS end_offset,
    coalesce(seg.max_timestamp_ms, 0)::bigint AS max_timestamp_ms,
    coalesce(seg.segment_size_bytes, 0)::integer AS segment_size_bytes,
    seg.custom_metadata AS custom_metadata,
    coalesce(seg.txn_index_empty, false)::boolean AS txn_index_empty,
    coalesce(seg.epochs, '{}')::integer[] AS epochs,
    coalesce(seg.epoch_start_offsets, '{}')::bigint[] AS epoch_start_offsets,
    coalesce(seg.added_version, -1)::bigint AS added_version,
    coalesce(seg.finished_version, -1)::bigint AS finished_version
FROM (SELECT 1) AS one
LEFT JOIN segment seg ON true;

-- name: SegmentLookup :one
-- The finished segment whose range of @epoch contains @lookup_offset; among
-- overlapping ones, the range that starts latest, then the one finished last.
-- A segment holding the offset starts in [offset - max_segment_span,
-- offset], so the partition row by its key bounds a backward walk of
-- rlmm_segments_list_idx, hit or miss (Kafka's segments follow each other:
-- one or two rows). Each candidate's epoch at the offset comes from its own
-- arrays: width_bucket finds the last epoch starting at or before the
-- offset (0, no epoch, before the first). The answer is the row the walk
-- read, so a hit reads two indexes and no segment twice.
SELECT s.topic_id, s.partition, s.segment_id, s.topic, s.start_offset, s.end_offset, s.max_timestamp_ms,
       s.broker_id, s.event_timestamp_ms, s.segment_size_bytes, s.custom_metadata, s.state, s.txn_index_empty,
       s.epochs, s.epoch_start_offsets, s.added_version /* the API's columns: see the top of segments.sql */
FROM rlmm_partitions p
CROSS JOIN LATERAL (
    SELECT s.* FROM rlmm_segments s
    WHERE s.topic_id = p.topic_id AND s.partition = p.partition
      AND s.state IN (0, 1, 2) /* COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED */
      AND s.state <> 0 AND s.state <> 2 /* COPY_SEGMENT_FINISHED: see SegmentFirstForTimestamp */
      AND s.start_offset <= @lookup_offset::bigint
      AND s.start_offset >= (@lookup_offset::bigint) - p.max_segment_span
      AND s.end_offset >= @lookup_offset::bigint
      AND s.epochs[width_bucket(@lookup_offset::bigint, s.epoch_start_offsets)] = @epoch::integer
    ORDER BY s.epoch_start_offsets[width_bucket(@lookup_offset::bigint, s.epoch_start_offsets)] DESC, s.finished_version DESC
    LIMIT 1
) AS s
WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer
  AND p.delete_state IS DISTINCT FROM 2;

-- name: SegmentHighestOffset :one
-- The largest end offset of a finished segment carrying @epoch: the greater
-- of the segments of that one epoch (rlmm_segments_epoch_highest_idx) and
-- the epoch rows of those spanning several (rlmm_segment_epochs_highest_idx),
-- one backward descent each. No row: none such.
SELECT h.segment_end_offset::bigint AS segment_end_offset
FROM (SELECT greatest(
        (SELECT s.end_offset FROM rlmm_segments s
         WHERE s.topic_id = @topic_id::uuid AND s.partition = @partition::integer
           AND s.epochs[1] = @epoch::integer AND s.state = 1 /* COPY_SEGMENT_FINISHED */ AND cardinality(s.epochs) = 1
         ORDER BY s.end_offset DESC
         LIMIT 1),
        (SELECT e.segment_end_offset FROM rlmm_segment_epochs e
         WHERE e.topic_id = @topic_id::uuid AND e.partition = @partition::integer AND e.epoch = @epoch::integer
           AND e.state = 1 /* COPY_SEGMENT_FINISHED */
         ORDER BY e.segment_end_offset DESC
         LIMIT 1)
     ) AS segment_end_offset OFFSET 0) AS h /* OFFSET 0: see EpochEndOffset */
WHERE h.segment_end_offset IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM rlmm_partitions p
                  WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer AND p.delete_state = 2 /* DELETE_PARTITION_FINISHED */);

-- name: SegmentList :many
-- Every segment of the partition that is not forgotten, in list order, from
-- rlmm_segments_list_idx.
SELECT s.topic_id, s.partition, s.segment_id, s.topic, s.start_offset, s.end_offset, s.max_timestamp_ms,
       s.broker_id, s.event_timestamp_ms, s.segment_size_bytes, s.custom_metadata, s.state, s.txn_index_empty,
       s.epochs, s.epoch_start_offsets, s.added_version /* the API's columns: see the top of segments.sql */
FROM rlmm_segments s
WHERE s.topic_id = @topic_id::uuid AND s.partition = @partition::integer
  AND s.state IN (0, 1, 2) /* COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED */
  AND NOT EXISTS (SELECT 1 FROM rlmm_partitions p
                  WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer AND p.delete_state = 2 /* DELETE_PARTITION_FINISHED */)
ORDER BY s.start_offset, s.added_version;

-- name: SegmentListPage :many
-- A page of SegmentList for the streaming iterators (iter.go): the next
-- @page_size segments after the cursor (@after_start_offset,
-- @after_added_version) in list order, read through rlmm_segments_list_idx.
-- The cursor is the last row of the previous page, (-1, -1) for the first.
-- The list key (start_offset, added_version) is unique in a partition and
-- never changes, so pages neither repeat nor skip a segment that stays
-- visible.
SELECT s.topic_id, s.partition, s.segment_id, s.topic, s.start_offset, s.end_offset, s.max_timestamp_ms,
       s.broker_id, s.event_timestamp_ms, s.segment_size_bytes, s.custom_metadata, s.state, s.txn_index_empty,
       s.epochs, s.epoch_start_offsets, s.added_version /* the API's columns: see the top of segments.sql */
FROM rlmm_segments s
WHERE s.topic_id = @topic_id::uuid AND s.partition = @partition::integer
  AND s.state IN (0, 1, 2) /* COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED */
  AND (s.start_offset, s.added_version) > (@after_start_offset::bigint, @after_added_version::bigint)
  AND NOT EXISTS (SELECT 1 FROM rlmm_partitions p
                  WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer AND p.delete_state = 2 /* DELETE_PARTITION_FINISHED */)
ORDER BY s.start_offset, s.added_version
LIMIT @page_size::integer;

-- name: SegmentListByEpoch :many
-- SegmentList restricted to the segments carrying @epoch, in list order:
-- the segments of that one epoch, one range of rlmm_segments_epoch_list_idx
-- already in list order, merged with the few that span several epochs
-- (their epoch rows in rlmm_segment_epochs_list_idx, each segment then by
-- its id).
SELECT u.topic_id, u.partition, u.segment_id, u.topic, u.start_offset, u.end_offset, u.max_timestamp_ms,
       u.broker_id, u.event_timestamp_ms, u.segment_size_bytes, u.custom_metadata, u.state, u.txn_index_empty,
       u.epochs, u.epoch_start_offsets, u.added_version /* the API's columns: see the top of segments.sql */
FROM (
    SELECT s.topic_id, s.partition, s.segment_id, s.topic, s.start_offset, s.end_offset, s.max_timestamp_ms,
           s.broker_id, s.event_timestamp_ms, s.segment_size_bytes, s.custom_metadata, s.state, s.txn_index_empty,
           s.epochs, s.epoch_start_offsets, s.added_version
    FROM rlmm_segments s
    WHERE s.topic_id = @topic_id::uuid AND s.partition = @partition::integer AND s.epochs[1] = @epoch::integer
      AND s.state IN (0, 1, 2) /* COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED */
      AND cardinality(s.epochs) = 1
    UNION ALL
    SELECT s.topic_id, s.partition, s.segment_id, s.topic, s.start_offset, s.end_offset, s.max_timestamp_ms,
           s.broker_id, s.event_timestamp_ms, s.segment_size_bytes, s.custom_metadata, s.state, s.txn_index_empty,
           s.epochs, s.epoch_start_offsets, s.added_version
    FROM rlmm_segment_epochs e
    JOIN rlmm_segments s ON s.segment_id = e.segment_id AND (s.topic_id = @topic_id::uuid AND s.partition = @partition::integer) IS TRUE
    WHERE e.topic_id = @topic_id::uuid AND e.partition = @partition::integer AND e.epoch = @epoch::integer
      AND e.state IN (0, 1, 2) /* COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED */
) AS u
WHERE NOT EXISTS (SELECT 1 FROM rlmm_partitions p
                  WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer AND p.delete_state = 2 /* DELETE_PARTITION_FINISHED */)
ORDER BY u.start_offset, u.added_version;

-- name: SegmentListByEpochPage :many
-- A page of SegmentListByEpoch after the cursor, as SegmentListPage: each
-- source's range starts after the cursor, and the merge stops at
-- @page_size rows.
SELECT u.topic_id, u.partition, u.segment_id, u.topic, u.start_offset, u.end_offset, u.max_timestamp_ms,
       u.broker_id, u.event_timestamp_ms, u.segment_size_bytes, u.custom_metadata, u.state, u.txn_index_empty,
       u.epochs, u.epoch_start_offsets, u.added_version /* the API's columns: see the top of segments.sql */
FROM (
    SELECT s.topic_id, s.partition, s.segment_id, s.topic, s.start_offset, s.end_offset, s.max_timestamp_ms,
           s.broker_id, s.event_timestamp_ms, s.segment_size_bytes, s.custom_metadata, s.state, s.txn_index_empty,
           s.epochs, s.epoch_start_offsets, s.added_version
    FROM rlmm_segments s
    WHERE s.topic_id = @topic_id::uuid AND s.partition = @partition::integer AND s.epochs[1] = @epoch::integer
      AND s.state IN (0, 1, 2) /* COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED */
      AND cardinality(s.epochs) = 1
       AND (s.start_offset, s.added_version) > (@after_start_offset::bigint, @after_added_version::bigint)
    UNION ALL
    SELECT s.topic_id, s.partition, s.segment_id, s.topic, s.start_offset, s.end_offset, s.max_timestamp_ms,
           s.broker_id, s.event_timestamp_ms, s.segment_size_bytes, s.custom_metadata, s.state, s.txn_index_empty,
           s.epochs, s.epoch_start_offsets, s.added_version
    FROM rlmm_segment_epochs e
    JOIN rlmm_segments s ON s.segment_id = e.segment_id AND (s.topic_id = @topic_id::uuid AND s.partition = @partition::integer) IS TRUE
    WHERE e.topic_id = @topic_id::uuid AND e.partition = @partition::integer AND e.epoch = @epoch::integer
      AND e.state IN (0, 1, 2) /* COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED */
       AND (e.segment_start_offset, e.added_version) > (@after_start_offset::bigint, @after_added_version::bigint)
) AS u
WHERE NOT EXISTS (SELECT 1 FROM rlmm_partitions p
                  WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer AND p.delete_state = 2 /* DELETE_PARTITION_FINISHED */)
ORDER BY u.start_offset, u.added_version
LIMIT @page_size::integer;

-- name: SegmentSizeByEpoch :one
-- Sum of the sizes of SegmentListByEpoch: one range of
-- rlmm_segments_epoch_list_idx (the segments of that one epoch) and one of
-- rlmm_segment_epochs_list_idx (the epoch rows of those spanning several,
-- each carrying its segment's size).
SELECT (CASE WHEN EXISTS (SELECT 1 FROM rlmm_partitions p
                          WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer AND p.delete_state = 2 /* DELETE_PARTITION_FINISHED */)
             THEN 0
             ELSE (SELECT coalesce(sum(s.segment_size_bytes), 0) FROM rlmm_segments s
                   WHERE s.topic_id = @topic_id::uuid AND s.partition = @partition::integer AND s.epochs[1] = @epoch::integer
                     AND s.state IN (0, 1, 2) /* COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED */
                     AND cardinality(s.epochs) = 1)
                + (SELECT coalesce(sum(e.segment_size_bytes), 0) FROM rlmm_segment_epochs e
                   WHERE e.topic_id = @topic_id::uuid AND e.partition = @partition::integer AND e.epoch = @epoch::integer
                     AND e.state IN (0, 1, 2) /* COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED */)
        END)::bigint AS size;

-- name: SegmentNextWithTxnIndex :one
-- Walks the lookups of @epoch from @lookup_offset (each step looks up the
-- offset after the previous segment's end) while the segments have no
-- transaction index, and returns the first one that has one. The walk stops
-- at a miss. Each step is the lookup of SegmentLookup, in the same shape.
WITH RECURSIVE walk AS (
    (SELECT hit.segment_id, hit.end_offset, hit.txn_index_empty
     FROM rlmm_partitions p
     CROSS JOIN LATERAL (
         SELECT s.segment_id, s.end_offset, s.txn_index_empty
         FROM rlmm_segments s
         WHERE s.topic_id = p.topic_id AND s.partition = p.partition
           AND s.state IN (0, 1, 2) /* COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED */
           AND s.state <> 0 AND s.state <> 2 /* COPY_SEGMENT_FINISHED */
           AND s.start_offset <= @lookup_offset::bigint
           AND s.start_offset >= (@lookup_offset::bigint) - p.max_segment_span
           AND s.end_offset >= @lookup_offset::bigint
           AND s.epochs[width_bucket(@lookup_offset::bigint, s.epoch_start_offsets)] = @epoch::integer
         ORDER BY s.epoch_start_offsets[width_bucket(@lookup_offset::bigint, s.epoch_start_offsets)] DESC, s.finished_version DESC
         LIMIT 1
     ) AS hit
     WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer
       AND p.delete_state IS DISTINCT FROM 2)
    UNION ALL
    SELECT next.segment_id, next.end_offset, next.txn_index_empty
    FROM walk,
    LATERAL (
        SELECT hit.segment_id, hit.end_offset, hit.txn_index_empty
        FROM rlmm_partitions p
        CROSS JOIN LATERAL (
            SELECT s.segment_id, s.end_offset, s.txn_index_empty
            FROM rlmm_segments s
            WHERE s.topic_id = p.topic_id AND s.partition = p.partition
              AND s.state IN (0, 1, 2) /* COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED */
              AND s.state <> 0 AND s.state <> 2 /* COPY_SEGMENT_FINISHED */
              AND s.start_offset <= walk.end_offset + 1
              AND s.start_offset >= walk.end_offset + 1 - p.max_segment_span
              AND s.end_offset >= walk.end_offset + 1
              AND s.epochs[width_bucket(walk.end_offset + 1, s.epoch_start_offsets)] = @epoch::integer
            ORDER BY s.epoch_start_offsets[width_bucket(walk.end_offset + 1, s.epoch_start_offsets)] DESC, s.finished_version DESC
            LIMIT 1
        ) AS hit
        WHERE p.topic_id = @topic_id::uuid AND p.partition = @partition::integer
    ) AS next
    WHERE walk.txn_index_empty AND walk.end_offset < 9223372036854775807
)
SELECT s.topic_id, s.partition, s.segment_id, s.topic, s.start_offset, s.end_offset, s.max_timestamp_ms,
       s.broker_id, s.event_timestamp_ms, s.segment_size_bytes, s.custom_metadata, s.state, s.txn_index_empty,
       s.epochs, s.epoch_start_offsets, s.added_version /* the API's columns: see the top of segments.sql */
FROM rlmm_segments s
WHERE s.segment_id = (SELECT walk.segment_id FROM walk WHERE NOT walk.txn_index_empty LIMIT 1)
  AND (s.topic_id = @topic_id::uuid AND s.partition = @partition::integer) IS TRUE;
