-- +goose Up
-- rlmm:compatible-with 2
-- Purging through a function, for DBAs and for the library alike:
--
--   rlmm_purge_round(older_than, batch_size)  one bounded round; what the
--                                             library's PurgeForgotten runs
--                                             in a loop (purge.go)
--   rlmm_purge(older_than, batch_size)        the same round for psql: the
--                                             number of segments and
--                                             partitions it purged
--
-- A round deletes up to batch_size segments forgotten for older_than
-- (DELETE_SEGMENT_FINISHED since their updated_at), up to batch_size
-- segments of partitions whose delete finished that long ago, and takes the
-- delete record of up to batch_size such partitions with no segment left
-- (adds work again). Every row lock is taken with SKIP LOCKED: a round
-- never waits on a broker's write or another purge, and holds its locks for
-- one bounded transaction. Purging everything is calling it until it
-- returns 0. Each segment deleted takes its epoch rows along and marks its
-- partition (triggers of migrations 00007 and 00010); each partition whose
-- record is taken is notified, so the caches reload or follow it.
--
-- Both SECURITY DEFINER, owned by the owner role, executable by no one until
-- granted (`rlmmctl roles sql` grants rlmm_purge_round to the application
-- role, both to the DBA role). Expand-only: code of schema 2 and later runs
-- its own purge statements, which this leaves as they were.

-- +goose StatementBegin
CREATE FUNCTION rlmm_purge_round(older_than interval, batch_size integer,
                                 OUT segments bigint, OUT topic_ids uuid[], OUT partitions integer[], OUT topics text[], OUT versions bigint[])
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    of_deleted bigint;
BEGIN
    IF older_than IS NULL OR older_than < interval '0' OR batch_size IS NULL OR batch_size < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('rlmm_purge_round(older_than %s, batch_size %s): older_than must be 0 or more, batch_size 1 or more',
                             coalesce(older_than::text, 'NULL'), coalesce(batch_size::text, 'NULL'));
    END IF;

    -- Segments in DELETE_SEGMENT_FINISHED, oldest first, from the front of
    -- rlmm_segments_forgotten_idx. A segment whose partition row a writer
    -- holds is left for the next round.
    WITH candidates AS MATERIALIZED (
        SELECT s.topic_id, s.partition, s.segment_id
        FROM rlmm_segments s
        WHERE s.state = 3 /* DELETE_SEGMENT_FINISHED */
          AND s.updated_at <= now() - older_than
        ORDER BY s.updated_at
        LIMIT batch_size
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
        RETURNING s.topic_id
    )
    SELECT count(*) INTO segments FROM deleted;

    -- Segments, in any state, of partitions whose delete finished
    -- (rlmm_partitions_deleted_idx), each partition read by the primary
    -- key's prefix.
    WITH locked_partitions AS MATERIALIZED (
        SELECT p.topic_id, p.partition
        FROM rlmm_partitions p
        WHERE p.delete_state = 2 /* DELETE_PARTITION_FINISHED */
          AND p.updated_at <= now() - older_than
          AND EXISTS (SELECT 1 FROM rlmm_segments s WHERE s.topic_id = p.topic_id AND s.partition = p.partition)
        LIMIT batch_size
        FOR UPDATE SKIP LOCKED
    ), victims AS MATERIALIZED (
        SELECT s.topic_id, s.partition, s.segment_id
        FROM locked_partitions lp
        JOIN rlmm_segments s ON s.topic_id = lp.topic_id AND s.partition = lp.partition
        LIMIT batch_size
        FOR UPDATE OF s SKIP LOCKED
    ), deleted AS (
        DELETE FROM rlmm_segments s
        USING victims v
        WHERE s.segment_id = v.segment_id AND (s.topic_id = v.topic_id AND s.partition = v.partition) IS TRUE
        RETURNING s.topic_id
    )
    SELECT count(*) INTO of_deleted FROM deleted;
    segments := segments + of_deleted;

    -- The delete record of partitions whose delete finished and that have
    -- no segment left. The row stays, so that its version keeps growing
    -- (CaughtUp and the caches compare it); the write bumps it, stamps
    -- purged_version with it (which the delete guard of migration 00011
    -- requires of this one write), and deletes the partition's epoch ends,
    -- which its delete had hidden.
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
                AND q.updated_at <= now() - older_than
                AND NOT EXISTS (SELECT 1 FROM rlmm_segments s WHERE s.topic_id = q.topic_id AND s.partition = q.partition)
              LIMIT batch_size
              FOR UPDATE SKIP LOCKED) c
        WHERE p.topic_id = c.topic_id AND p.partition = c.partition
        RETURNING p.topic_id, p.partition, p.topic, p.version
    ), ends AS (
        DELETE FROM rlmm_epoch_ends ee
        USING cleared c
        WHERE ee.topic_id = c.topic_id AND ee.partition = c.partition
    ), notified AS (
        SELECT c.*, pg_notify('rlmm_changes', c.topic_id::text || '/' || c.partition || '/' || c.version) FROM cleared c
    )
    SELECT coalesce(array_agg(n.topic_id), '{}'), coalesce(array_agg(n.partition), '{}'),
           coalesce(array_agg(n.topic), '{}'), coalesce(array_agg(n.version), '{}')
    INTO topic_ids, partitions, topics, versions
    FROM notified n;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION rlmm_purge_round(interval, integer) IS 'One bounded round of purging (migrations/00018): deletes up to batch_size segments forgotten for older_than, up to batch_size segments of partitions deleted that long ago, and takes the delete record of up to batch_size such partitions with no segment left (each notified). Returns the segments deleted and the partitions whose record it took, with their new versions. Takes every lock with SKIP LOCKED.';

-- +goose StatementBegin
CREATE FUNCTION rlmm_purge(older_than interval DEFAULT interval '7 days', batch_size integer DEFAULT 1000) RETURNS bigint
LANGUAGE sql SECURITY DEFINER AS $$
    SELECT r.segments + cardinality(r.partitions) FROM rlmm_purge_round(older_than, batch_size) r
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION rlmm_purge(interval, integer) IS 'Repair: one round of rlmm_purge_round for psql, returning how many segments it deleted plus how many deleted partitions'' records it took; call it until it returns 0 to purge everything forgotten for older_than (default 7 days).';

-- +goose StatementBegin
DO $$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['rlmm_purge_round(interval, integer)', 'rlmm_purge(interval, integer)'] LOOP
        EXECUTE format('ALTER FUNCTION %I.%s SET search_path = %I, pg_temp', current_schema(), f, current_schema());
        EXECUTE format('REVOKE ALL ON FUNCTION %I.%s FROM PUBLIC', current_schema(), f);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION rlmm_purge(interval, integer);
DROP FUNCTION rlmm_purge_round(interval, integer);
