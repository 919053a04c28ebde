-- +goose Up
-- rlmm:compatible-with 2
-- Repairs through functions: what docs/DBA.md tells a DBA to do from psql,
-- as functions that do all of it in one call, with the library's checks and
-- bookkeeping written out in their bodies rather than left to triggers:
--
--   rlmm_set_segment_state(segment_id, state, broker_id, event_timestamp_ms)
--   rlmm_set_partition_delete_state(topic_id, partition, state, broker_id, event_timestamp_ms)
--   rlmm_resync()
--
-- They are SECURITY DEFINER, owned by the role that migrates (the schema's
-- owner), with the search path pinned to this schema, and nobody may call
-- them but that owner until granted: `rlmmctl roles sql` grants them to the
-- role for people, which gets no INSERT, UPDATE, DELETE or TRUNCATE.
--
-- Each takes the partition's row lock before the segment's, as the
-- library's writes do (a raw UPDATE of a segment takes them the other way
-- round), checks the transition against the tables that copy
-- statemachine.go, bumps the partition's version, moves the segment and its
-- epoch rows, raises the epoch ends on COPY_SEGMENT_FINISHED, and notifies
-- the brokers' caches at commit.
--
-- Expand-only: three functions added. Code of schema 2 and later never
-- calls them.

-- +goose StatementBegin
CREATE FUNCTION rlmm_set_segment_state(segment_id uuid, state text, broker_id integer DEFAULT -1,
                                       event_timestamp_ms bigint DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    target    smallint;
    seg       record;
    new_version bigint;
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

    -- The partition first, as the library locks it; then the segment, read
    -- again under the partition's lock so that its state is the one the
    -- last committed writer left.
    SELECT s.topic_id, s.partition INTO seg FROM rlmm_segments s WHERE s.segment_id = rlmm_set_segment_state.segment_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'no_data_found',
            MESSAGE = format('no segment %s', segment_id);
    END IF;
    SELECT p.version, p.delete_state INTO new_version, del FROM rlmm_partitions p
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
        RETURN new_version; -- already there: nothing changes
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

    new_version := new_version + 1;
    UPDATE rlmm_partitions p SET version = new_version, updated_at = now()
    WHERE p.topic_id = seg.topic_id AND p.partition = seg.partition;
    -- last_version stamped here: the guard trigger takes the write for the
    -- library's and leaves the bookkeeping to this function.
    UPDATE rlmm_segments s
    SET state = target,
        broker_id = rlmm_set_segment_state.broker_id,
        event_timestamp_ms = coalesce(rlmm_set_segment_state.event_timestamp_ms, (extract(epoch FROM clock_timestamp()) * 1000)::bigint),
        finished_version = CASE WHEN target = 1 THEN coalesce(s.finished_version, new_version) ELSE s.finished_version END,
        epoch_ends_raised = CASE WHEN target = 1 THEN true ELSE s.epoch_ends_raised END,
        last_version = new_version,
        updated_at = now()
    WHERE s.segment_id = seg.segment_id;
    UPDATE rlmm_segment_epochs e
    SET state = target,
        finished_version = CASE WHEN target = 1 THEN coalesce(seg.finished_version, new_version) ELSE seg.finished_version END,
        last_version = new_version
    WHERE e.topic_id = seg.topic_id AND e.partition = seg.partition AND e.segment_id = seg.segment_id;
    IF target = 1 THEN
        -- COPY_SEGMENT_FINISHED raises the partition's epoch ends, as the
        -- library's SegmentUpdate does; nothing lowers them.
        INSERT INTO rlmm_epoch_ends AS ee (topic_id, partition, epoch, end_offset, max_segment_span, raised_version)
        SELECT e.topic_id, e.partition, e.epoch, e.last_offset, e.segment_end_offset - e.segment_start_offset, new_version
        FROM rlmm_segment_epochs e
        WHERE e.topic_id = seg.topic_id AND e.partition = seg.partition AND e.segment_id = seg.segment_id
        ON CONFLICT (topic_id, partition, epoch) DO UPDATE
        SET end_offset = greatest(ee.end_offset, excluded.end_offset),
            max_segment_span = greatest(ee.max_segment_span, excluded.max_segment_span),
            raised_version = excluded.raised_version
        WHERE excluded.end_offset > ee.end_offset OR excluded.max_segment_span > ee.max_segment_span;
    END IF;
    PERFORM pg_notify('rlmm_changes', seg.topic_id::text || '/' || seg.partition || '/' || new_version);
    RETURN new_version;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION rlmm_set_segment_state(uuid, text, integer, bigint) IS 'Repair: moves a segment to a state (COPY_SEGMENT_FINISHED, or copy_finished, say) when rlmm_segment_transitions allows it, with the library''s bookkeeping (partition version, epoch rows, epoch ends, notification), recording broker_id (default -1, an operator) and event_timestamp_ms (default now). Returns the partition''s version after the change; the current state again changes nothing. SQLSTATE 23514 for a forbidden transition, P0002 for an unknown or forgotten segment, 22023 for an unknown state.';

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
    SELECT p.topic, p.version, p.delete_state INTO cur FROM rlmm_partitions p
    WHERE p.topic_id = rlmm_set_partition_delete_state.topic_id AND p.partition = rlmm_set_partition_delete_state.partition
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'no_data_found',
            MESSAGE = format('no partition %s of topic id %s: no segment or delete record was ever written for it', partition, topic_id);
    END IF;
    IF cur.delete_state IS NOT DISTINCT FROM target THEN
        RETURN cur.version; -- already there: nothing changes
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
    new_version := cur.version + 1;
    -- The version bumped in the same UPDATE: the guard trigger takes the
    -- write for the library's and adds no bookkeeping.
    UPDATE rlmm_partitions p
    SET version = new_version,
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
COMMENT ON FUNCTION rlmm_set_partition_delete_state(uuid, integer, text, integer, bigint) IS 'Repair: moves a partition''s delete state (DELETE_PARTITION_FINISHED, or delete_finished, say) when rlmm_partition_delete_transitions allows it, recording broker_id (default -1) and event_timestamp_ms (default now); bumps its version and notifies the caches. Returns the partition''s version after the change; the current state again changes nothing. SQLSTATE 23514 for a forbidden transition, P0002 for a partition never written, 22023 for an unknown state.';

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
DO $$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['rlmm_set_segment_state(uuid, text, integer, bigint)',
                             'rlmm_set_partition_delete_state(uuid, integer, text, integer, bigint)',
                             'rlmm_resync()'] LOOP
        EXECUTE format('ALTER FUNCTION %I.%s SET search_path = %I, pg_temp', current_schema(), f, current_schema());
        EXECUTE format('REVOKE ALL ON FUNCTION %I.%s FROM PUBLIC', current_schema(), f);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION rlmm_resync();
DROP FUNCTION rlmm_set_partition_delete_state(uuid, integer, text, integer, bigint);
DROP FUNCTION rlmm_set_segment_state(uuid, text, integer, bigint);
