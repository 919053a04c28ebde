-- Release 1's baseline, part 3 of 4 (1_tables.sql says how the parts make
-- the migration): the repair functions (docs/DBA.md, "Repairs") and the
-- purge, SECURITY DEFINER and owned by the migration's role.

-- +goose StatementBegin
CREATE FUNCTION rlmm_set_segment_state(segment_id uuid, state text, broker_id integer DEFAULT -1,
                                       event_timestamp_ms bigint DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    target    smallint;
    seg       record;
    new_version bigint;
    write_order bigint;
    del       smallint;
    from_name text;
    to_name   text;
    targets   text;
BEGIN
    IF segment_id IS NULL OR state IS NULL OR broker_id IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed',
            MESSAGE = 'rlmm_set_segment_state(segment_id, state, broker_id, event_timestamp_ms): only event_timestamp_ms may be NULL (now)';
    END IF;
    SELECT st.state INTO target FROM rlmm_segment_states st
    WHERE st.name = upper(rlmm_set_segment_state.state)
       OR st.name = upper(replace(rlmm_set_segment_state.state, '_', '_SEGMENT_'));
    IF target IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('unknown segment state %L; the states are %s', state,
                             (SELECT string_agg(st.name, ', ' ORDER BY st.state) FROM rlmm_segment_states st));
    END IF;

    -- The partition first, as the library locks it (its writes' orders
    -- follow their commits); then the segment, read again under the
    -- partition's lock so that its state is the one the last committed
    -- writer left.
    SELECT s.topic_id, s.partition INTO seg FROM rlmm_segments s WHERE s.segment_id = rlmm_set_segment_state.segment_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'no_data_found',
            MESSAGE = format('no segment %s', segment_id);
    END IF;
    SELECT p.delete_state INTO del FROM rlmm_partitions p
    WHERE p.topic_id = seg.topic_id AND p.partition = seg.partition
    FOR NO KEY UPDATE;
    SELECT s.* INTO seg FROM rlmm_segments s WHERE s.segment_id = rlmm_set_segment_state.segment_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'no_data_found',
            MESSAGE = format('no segment %s', segment_id);
    END IF;
    IF del = 2 THEN
        -- The library's answer too: such a segment is not found.
        RAISE EXCEPTION USING ERRCODE = 'no_data_found',
            MESSAGE = format('segment %s (topic %s, partition %s) is forgotten: its partition''s delete finished (DELETE_PARTITION_FINISHED), so its state can no longer change',
                             seg.segment_id, seg.topic, seg.partition);
    END IF;
    IF seg.state = target THEN
        RETURN seg.last_version; -- already there: nothing changes
    END IF;
    IF NOT EXISTS (SELECT FROM rlmm_segment_transitions t WHERE t.from_state = seg.state AND t.to_state = target) THEN
        SELECT (SELECT st.name FROM rlmm_segment_states st WHERE st.state = seg.state),
               (SELECT st.name FROM rlmm_segment_states st WHERE st.state = target),
               (SELECT string_agg(st.name, ' or ' ORDER BY st.state)
                FROM rlmm_segment_transitions t JOIN rlmm_segment_states st ON st.state = t.to_state
                WHERE t.from_state = seg.state AND t.to_state <> seg.state)
        INTO from_name, to_name, targets;
        RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'rlmm_segments_state_transition',
            MESSAGE = format('segment %s (topic %s, partition %s): %s -> %s is not an allowed transition; %s',
                             seg.segment_id, seg.topic, seg.partition, from_name, to_name,
                             CASE WHEN targets IS NULL THEN format('a segment in %s never changes state again', from_name)
                                  ELSE format('from %s a segment may only move to %s', from_name, targets) END),
            HINT = 'The allowed transitions are in rlmm_segment_transitions (statemachine.go).';
    END IF;

    -- The write order taken under the partition's lock, and last_version
    -- stamped, as the library stamps it: the state guard lets the write
    -- through.
    write_order := nextval('rlmm_versions');
    new_version := greatest(seg.last_version + 1, write_order);
    UPDATE rlmm_segments s
    SET state = target,
        broker_id = rlmm_set_segment_state.broker_id,
        event_timestamp_ms = coalesce(rlmm_set_segment_state.event_timestamp_ms, (extract(epoch FROM clock_timestamp()) * 1000)::bigint),
        finished_version = CASE WHEN target = 1 THEN coalesce(s.finished_version, write_order) ELSE s.finished_version END,
        last_version = new_version,
        last_xid = pg_current_xact_id(),
        updated_at = now()
    WHERE s.segment_id = seg.segment_id;
    UPDATE rlmm_segment_epochs e
    SET state = target,
        finished_version = CASE WHEN target = 1 THEN coalesce(seg.finished_version, write_order) ELSE seg.finished_version END,
        last_version = new_version
    WHERE e.topic_id = seg.topic_id AND e.partition = seg.partition AND e.segment_id = seg.segment_id;
    PERFORM pg_notify('rlmm_changes', seg.topic_id::text || '/' || seg.partition || '/' || write_order);
    RETURN new_version;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION rlmm_set_segment_state(uuid, text, integer, bigint) IS 'Repair: moves a segment to a state (COPY_SEGMENT_FINISHED, or copy_finished, say) when rlmm_segment_transitions allows it, with the library''s bookkeeping (write order, change feed, epoch rows, notification), recording broker_id (default -1, an operator) and event_timestamp_ms (default now). Returns the segment''s last_version after the change; the current state again changes nothing. SQLSTATE 23514 for a forbidden transition, P0002 for an unknown or forgotten segment, 22023 for an unknown state.';

-- +goose StatementBegin
CREATE FUNCTION rlmm_set_partition_delete_state(topic_id uuid, partition integer, state text, broker_id integer DEFAULT -1,
                                                event_timestamp_ms bigint DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    target    smallint;
    cur       record;
    new_version bigint;
    from_name text;
    to_name   text;
    targets   text;
BEGIN
    IF topic_id IS NULL OR partition IS NULL OR state IS NULL OR broker_id IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed',
            MESSAGE = 'rlmm_set_partition_delete_state(topic_id, partition, state, broker_id, event_timestamp_ms): only event_timestamp_ms may be NULL (now)';
    END IF;
    SELECT st.state INTO target FROM rlmm_partition_delete_states st
    WHERE st.state >= 0
      AND (st.name = upper(rlmm_set_partition_delete_state.state)
           OR st.name = upper(replace(rlmm_set_partition_delete_state.state, '_', '_PARTITION_')));
    IF target IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('unknown partition delete state %L; the states are %s', state,
                             (SELECT string_agg(st.name, ', ' ORDER BY st.state) FROM rlmm_partition_delete_states st WHERE st.state >= 0));
    END IF;
    -- FOR UPDATE, as the library locks it: the writes in flight commit
    -- first, and those that follow see the change.
    SELECT p.topic, p.delete_version, p.delete_state INTO cur FROM rlmm_partitions p
    WHERE p.topic_id = rlmm_set_partition_delete_state.topic_id AND p.partition = rlmm_set_partition_delete_state.partition
    FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'no_data_found',
            MESSAGE = format('no partition %s of topic id %s: no segment or delete record was ever written for it', partition, topic_id);
    END IF;
    IF cur.delete_state IS NOT DISTINCT FROM target THEN
        RETURN cur.delete_version; -- already there: nothing changes
    END IF;
    IF NOT EXISTS (SELECT FROM rlmm_partition_delete_transitions t
                   WHERE t.from_state = coalesce(cur.delete_state, -1) AND t.to_state = target) THEN
        SELECT (SELECT st.name FROM rlmm_partition_delete_states st WHERE st.state = coalesce(cur.delete_state, -1)),
               (SELECT st.name FROM rlmm_partition_delete_states st WHERE st.state = target),
               (SELECT string_agg(st.name, ' or ' ORDER BY st.state)
                FROM rlmm_partition_delete_transitions t JOIN rlmm_partition_delete_states st ON st.state = t.to_state
                WHERE t.from_state = coalesce(cur.delete_state, -1) AND t.to_state <> coalesce(cur.delete_state, -1))
        INTO from_name, to_name, targets;
        RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'rlmm_partitions_delete_state_transition',
            MESSAGE = format('partition %s-%s (topic id %s): delete state %s -> %s is not an allowed transition; %s',
                             cur.topic, partition, topic_id, coalesce(from_name, 'none'), to_name,
                             CASE WHEN targets IS NULL THEN format('a partition in %s never changes delete state again', from_name)
                                  ELSE format('from %s a partition may only move to %s', coalesce(from_name, 'none'), targets) END),
            HINT = 'The allowed transitions are in rlmm_partition_delete_transitions (statemachine.go).';
    END IF;
    new_version := nextval('rlmm_versions');
    -- The write order stamped in the same UPDATE, as the library stamps it:
    -- the delete state guard lets the write through.
    UPDATE rlmm_partitions p
    SET delete_version = new_version,
        delete_state = target,
        delete_broker_id = rlmm_set_partition_delete_state.broker_id,
        delete_event_timestamp_ms = coalesce(rlmm_set_partition_delete_state.event_timestamp_ms, (extract(epoch FROM clock_timestamp()) * 1000)::bigint),
        updated_at = now()
    WHERE p.topic_id = rlmm_set_partition_delete_state.topic_id AND p.partition = rlmm_set_partition_delete_state.partition;
    PERFORM pg_notify('rlmm_changes', topic_id::text || '/' || partition || '/' || new_version);
    RETURN new_version;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION rlmm_set_partition_delete_state(uuid, integer, text, integer, bigint) IS 'Repair: moves a partition''s delete state (DELETE_PARTITION_FINISHED, or delete_finished, say) when rlmm_partition_delete_transitions allows it, recording broker_id (default -1) and event_timestamp_ms (default now); stamps its delete_version and notifies the caches. Returns the partition''s delete_version after the change; the current state again changes nothing. SQLSTATE 23514 for a forbidden transition, P0002 for a partition never written, 22023 for an unknown state.';

-- +goose StatementBegin
CREATE FUNCTION rlmm_resync() RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    generation bigint;
BEGIN
    INSERT INTO rlmm_data_generation AS g (id, generation) VALUES (1, 1)
    ON CONFLICT (id) DO UPDATE SET generation = g.generation + 1, changed_at = now()
    RETURNING g.generation INTO generation;
    PERFORM pg_notify('rlmm_changes', 'reset/' || generation);
    RETURN generation;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION rlmm_resync() IS 'Repair: every broker''s cache reloads every partition it holds (bumps rlmm_data_generation and notifies it), and answers CaughtUp false until it has. For after raw DML that bypassed the repair functions. Returns the new generation.';


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
    -- rlmm_segments_forgotten_idx. A segment whose partition row a delete
    -- record's writer or a segment's write holds is left for the next
    -- round.
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
        FOR NO KEY UPDATE SKIP LOCKED
    ), deleted AS (
        DELETE FROM rlmm_segments s
        USING candidates c, locked_partitions lp
        WHERE lp.topic_id = c.topic_id AND lp.partition = c.partition
          AND s.segment_id = c.segment_id AND (s.topic_id = c.topic_id AND s.partition = c.partition) IS TRUE
        RETURNING s.topic_id, s.partition, s.segment_id, s.last_xid, s.finished_version, s.epochs,
                  s.epoch_start_offsets, s.end_offset
    ), folded AS (
        -- EpochEndOffset outlives the segments: the ranges of those that
        -- had finished, from their own arrays, go into rlmm_epoch_ends.
        INSERT INTO rlmm_epoch_ends AS ee (topic_id, partition, epoch, end_offset)
        SELECT d.topic_id, d.partition, d.epochs[k], max(coalesce(d.epoch_start_offsets[k + 1] - 1, d.end_offset))
        FROM deleted d, generate_subscripts(d.epochs, 1) AS k
        WHERE d.finished_version IS NOT NULL
        GROUP BY d.topic_id, d.partition, d.epochs[k]
        ON CONFLICT (topic_id, partition, epoch) DO UPDATE
        SET end_offset = excluded.end_offset
        WHERE excluded.end_offset > ee.end_offset
    ), marked AS (
        -- A cache whose snapshot sees the last write of every row deleted
        -- had seen them forgotten; any other reloads.
        UPDATE rlmm_partitions p
        SET vanished_xid = greatest(p.vanished_xid, d.last_xid)
        FROM (SELECT d.topic_id, d.partition, max(d.last_xid) AS last_xid FROM deleted d GROUP BY d.topic_id, d.partition) d
        WHERE p.topic_id = d.topic_id AND p.partition = d.partition
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
        RETURNING s.topic_id, s.partition
    ), marked AS (
        -- Rows in any state: every cache whose snapshot precedes this
        -- purge reloads.
        UPDATE rlmm_partitions p
        SET vanished_xid = pg_current_xact_id()
        FROM (SELECT DISTINCT d.topic_id, d.partition FROM deleted d) d
        WHERE p.topic_id = d.topic_id AND p.partition = d.partition
    )
    SELECT count(*) INTO of_deleted FROM deleted;
    segments := segments + of_deleted;

    -- The delete record of partitions whose delete finished and that have
    -- no segment left. The row stays, so that its delete_version keeps
    -- growing (the caches keep the newest); the write stamps it, marks the
    -- partition vanished by this purge (a cache whose snapshot precedes it
    -- reloads the partition), and deletes the partition's epoch ends,
    -- which its delete had hidden.
    WITH cleared AS (
        UPDATE rlmm_partitions p
        SET delete_version = nextval('rlmm_versions'),
            vanished_xid = pg_current_xact_id(),
            delete_state = NULL,
            delete_broker_id = NULL,
            delete_event_timestamp_ms = NULL,
            max_segment_span = 0,
            updated_at = now()
        FROM (SELECT q.topic_id, q.partition
              FROM rlmm_partitions q
              WHERE q.delete_state = 2 /* DELETE_PARTITION_FINISHED */
                AND q.updated_at <= now() - older_than
                AND NOT EXISTS (SELECT 1 FROM rlmm_segments s WHERE s.topic_id = q.topic_id AND s.partition = q.partition)
              LIMIT batch_size
              FOR UPDATE SKIP LOCKED) c
        WHERE p.topic_id = c.topic_id AND p.partition = c.partition
        RETURNING p.topic_id, p.partition, p.topic, p.delete_version
    ), ends AS (
        DELETE FROM rlmm_epoch_ends ee
        USING cleared c
        WHERE ee.topic_id = c.topic_id AND ee.partition = c.partition
    ), notified AS (
        SELECT c.*, pg_notify('rlmm_changes', c.topic_id::text || '/' || c.partition || '/' || c.delete_version) FROM cleared c
    )
    SELECT coalesce(array_agg(n.topic_id), '{}'), coalesce(array_agg(n.partition), '{}'),
           coalesce(array_agg(n.topic), '{}'), coalesce(array_agg(n.delete_version), '{}')
    INTO topic_ids, partitions, topics, versions
    FROM notified n;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION rlmm_purge_round(interval, integer) IS 'One bounded round of purging (rlmm_purge, purge.go): deletes up to batch_size segments forgotten for older_than, up to batch_size segments of partitions deleted that long ago, and takes the delete record of up to batch_size such partitions with no segment left (each notified). Returns the segments deleted and the partitions whose record it took, with their new delete_version. Takes every lock with SKIP LOCKED.';

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
    FOREACH f IN ARRAY ARRAY['rlmm_set_segment_state(uuid, text, integer, bigint)',
                             'rlmm_set_partition_delete_state(uuid, integer, text, integer, bigint)',
                             'rlmm_resync()', 'rlmm_purge_round(interval, integer)', 'rlmm_purge(interval, integer)'] LOOP
        EXECUTE format('ALTER FUNCTION %I.%s SET search_path = %I, pg_temp', current_schema(), f, current_schema());
        EXECUTE format('REVOKE ALL ON FUNCTION %I.%s FROM PUBLIC', current_schema(), f);
    END LOOP;
END
$$;
-- +goose StatementEnd
