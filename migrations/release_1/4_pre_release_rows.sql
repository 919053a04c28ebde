-- Release 1's baseline, part 4 of 4 (1_tables.sql says how the parts make
-- the migration): the rows of a pre-release database, set aside by the
-- first statement of 1_tables.sql, copied into the baseline; then Down.

-- +goose StatementBegin
DO $pre_release$
DECLARE
    aside text := left(current_schema(), 40) || '_rlmm_pre_release';
    g record;
    n bigint;
    m bigint;
BEGIN
    IF to_regnamespace(aside) IS NULL THEN
        RETURN; -- a new database
    END IF;
    -- The rows of the pre-release tables, every column this schema keeps,
    -- and the epoch rows of the segments that span several epochs only.
    -- They take the size and max timestamp of their segment when they did
    -- not copy them (rows written before migration 00015).
    EXECUTE format($copy$
        INSERT INTO rlmm_partitions (topic_id, partition, topic, delete_version, max_segment_span, delete_state,
                                     delete_broker_id, delete_event_timestamp_ms, created_at, updated_at)
        SELECT p.topic_id, p.partition, p.topic, p.version,
               greatest((SELECT max(s.end_offset - s.start_offset) FROM %1$I.rlmm_segments s
                         WHERE s.topic_id = p.topic_id AND s.partition = p.partition),
                        (SELECT max(ee.max_segment_span) FROM %1$I.rlmm_epoch_ends ee
                         WHERE ee.topic_id = p.topic_id AND ee.partition = p.partition), 0),
               p.delete_state, p.delete_broker_id, p.delete_event_timestamp_ms, p.created_at, p.updated_at
        FROM %1$I.rlmm_partitions p;
        INSERT INTO rlmm_segments (topic_id, partition, segment_id, topic, start_offset, end_offset, max_timestamp_ms, broker_id,
                                   event_timestamp_ms, segment_size_bytes, custom_metadata, state, txn_index_empty, epochs,
                                   epoch_start_offsets, added_version, finished_version, last_version, last_xid, created_at, updated_at)
        SELECT topic_id, partition, segment_id, topic, start_offset, end_offset, max_timestamp_ms, broker_id,
               event_timestamp_ms, segment_size_bytes, custom_metadata, state, txn_index_empty, epochs,
               epoch_start_offsets, added_version, finished_version, last_version, pg_current_xact_id(), created_at, updated_at
        FROM %1$I.rlmm_segments;
        -- The pre-release versions counted per partition: the write order
        -- goes on above the largest.
        SELECT setval('rlmm_versions', greatest((SELECT max(p.version) FROM %1$I.rlmm_partitions p), 1));
        INSERT INTO rlmm_segment_epochs (topic_id, partition, segment_id, epoch, first_offset, last_offset, state,
                                         segment_start_offset, segment_end_offset, added_version, finished_version,
                                         last_version, segment_size_bytes, max_timestamp_ms)
        SELECT e.topic_id, e.partition, e.segment_id, e.epoch, e.first_offset, e.last_offset, e.state,
               e.segment_start_offset, e.segment_end_offset, e.added_version, e.finished_version,
               e.last_version, coalesce(e.segment_size_bytes, s.segment_size_bytes), coalesce(e.max_timestamp_ms, s.max_timestamp_ms)
        FROM %1$I.rlmm_segment_epochs e
        JOIN %1$I.rlmm_segments s ON s.segment_id = e.segment_id
        WHERE cardinality(s.epochs) > 1;
        INSERT INTO rlmm_epoch_ends (topic_id, partition, epoch, end_offset)
        SELECT topic_id, partition, epoch, end_offset
        FROM %1$I.rlmm_epoch_ends;
        INSERT INTO rlmm_data_generation AS g (id, generation, changed_at)
        SELECT id, generation, changed_at FROM %1$I.rlmm_data_generation
        ON CONFLICT (id) DO UPDATE SET generation = excluded.generation, changed_at = excluded.changed_at;
    $copy$, aside);
    EXECUTE format('SELECT count(*), count(*) FILTER (WHERE NOT EXISTS (SELECT FROM %1$I.rlmm_segments s
                                                                      WHERE s.segment_id = e.segment_id))
                    FROM %1$I.rlmm_segment_epochs e', aside) INTO n, m;
    IF m > 0 THEN
        RAISE EXCEPTION 'release 1''s baseline: % of the % pre-release epoch rows name no segment; nothing was changed', m, n;
    END IF;
    FOR g IN SELECT r.kind, r.name, r.privilege_type, r.is_grantable,
                    CASE WHEN r.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.grantee::regrole::text) END AS grantee
             FROM rlmm_pre_release_grants r
             WHERE (r.kind = 'TABLE' AND to_regclass(quote_ident(r.name)) IS NOT NULL)
                OR (r.kind = 'FUNCTION' AND EXISTS (SELECT FROM pg_proc p WHERE p.proname = r.name
                                                    AND p.pronamespace = current_schema()::regnamespace)) LOOP
        EXECUTE format('GRANT %s ON %s %I TO %s%s', g.privilege_type, g.kind, g.name, g.grantee,
                       CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
    EXECUTE format('DROP SCHEMA %I CASCADE', aside);
    -- Every cache reloads: its rows came from tables that are gone.
    PERFORM rlmm_resync();
END
$pre_release$;
-- +goose StatementEnd

-- The write order's sequence is new: every role that may write segments
-- (granted INSERT or UPDATE on rlmm_segments, by default privileges or by
-- the copy above) may take its numbers.
-- +goose StatementBegin
DO $grants$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(a.grantee::regrole::text) END AS grantee
             FROM pg_class c, aclexplode(c.relacl) a
             WHERE c.oid = 'rlmm_segments'::regclass AND a.privilege_type IN ('INSERT', 'UPDATE') AND a.grantee <> c.relowner LOOP
        EXECUTE format('GRANT USAGE ON SEQUENCE rlmm_versions TO %s', r.grantee);
    END LOOP;
END
$grants$;
-- +goose StatementEnd

-- +goose Down
-- Back to an empty schema (the data goes with it): the pre-release chain
-- cannot be restored.
DROP VIEW rlmm_segments_v, rlmm_segment_epochs_v, rlmm_partitions_v, rlmm_stuck_v;
DROP TABLE rlmm_epoch_ends, rlmm_segment_epochs, rlmm_segments, rlmm_partitions, rlmm_data_generation,
    rlmm_segment_states, rlmm_segment_transitions, rlmm_partition_delete_states, rlmm_partition_delete_transitions;
DROP DOMAIN rlmm_partition_number, rlmm_topic_name, rlmm_count, rlmm_offset, rlmm_epoch, rlmm_size,
    rlmm_segment_state, rlmm_delete_state;
DROP SEQUENCE rlmm_versions;
DROP FUNCTION rlmm_purge(interval, integer), rlmm_purge_round(interval, integer), rlmm_resync(),
    rlmm_set_partition_delete_state(uuid, integer, text, integer, bigint), rlmm_set_segment_state(uuid, text, integer, bigint),
    rlmm_state_guard(), rlmm_identity_guard();
