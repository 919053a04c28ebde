-- +goose Up
-- rlmm:compatible-with 2
-- Writes whose cost does not depend on statistics, and cheaper.
-- Expand-only for the library: its statements, the rows they write and the
-- rules those rows obey are unchanged; code of schema 2 and later runs on it.
--
-- 1. rlmm_segment_epochs_segment_fkey goes. Its insert-side check is a query
--    PostgreSQL plans once per connection, at the connection's first add:
--    "SELECT 1 FROM rlmm_segments WHERE topic_id = $1 AND partition = $2 AND
--    segment_id = $3 FOR KEY SHARE". On tables never analyzed and still
--    small, the planner answers it from rlmm_segments_changes_idx on
--    (topic_id, partition) and filters on segment_id, and the connection
--    keeps that plan: every later add read the whole partition's change feed
--    (measured: the CPU of an add and its finish doubled between the
--    8,000th and the 24,000th segment). The library writes a segment and its
--    epoch rows in one statement, so the check never found anything
--    missing; what the key did for DBAs, the triggers below still do: a
--    deleted segment takes its epoch rows with it (ON DELETE CASCADE), and
--    TRUNCATE of rlmm_segments truncates them too.
-- 2. The 18 CHECK constraints of the four tables become one per table, a
--    function of the row. PostgreSQL rebuilds every CHECK expression from
--    its stored text for each statement that writes the table (a profile of
--    add + finish: 14 % of the server's CPU in ExecConstraints); a function
--    call is read once per statement and compiled once per session. The
--    rules are the same, and a row that breaks one is refused as before,
--    with SQLSTATE 23514 and the name of the rule it breaks (the old
--    constraint's name), now with a message that says which values broke it.
--    The constraints are NOT VALID: the old ones checked every existing row
--    against the same rules, so no scan (and no long lock) is needed.

ALTER TABLE rlmm_segment_epochs DROP CONSTRAINT rlmm_segment_epochs_segment_fkey;

-- +goose StatementBegin
CREATE FUNCTION rlmm_segments_forget_epochs() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- Only the primary key of rlmm_segment_epochs matches (its other
    -- indexes are partial on state), so the plan cannot depend on statistics.
    EXECUTE format('DELETE FROM %I.rlmm_segment_epochs WHERE topic_id = $1 AND partition = $2 AND segment_id = $3',
                   TG_TABLE_SCHEMA)
        USING OLD.topic_id, OLD.partition, OLD.segment_id;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION rlmm_segments_forget_epochs() IS 'Trigger: a deleted segment row takes its epoch rows with it (what ON DELETE CASCADE of the dropped rlmm_segment_epochs_segment_fkey did).';
CREATE TRIGGER rlmm_segments_forget_epochs
    AFTER DELETE ON rlmm_segments
    FOR EACH ROW EXECUTE FUNCTION rlmm_segments_forget_epochs();

-- +goose StatementBegin
CREATE FUNCTION rlmm_segments_truncate_epochs() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('TRUNCATE %I.rlmm_segment_epochs', TG_TABLE_SCHEMA);
    RETURN NULL;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION rlmm_segments_truncate_epochs() IS 'Trigger: TRUNCATE of rlmm_segments truncates rlmm_segment_epochs too (what TRUNCATE ... CASCADE did through the dropped foreign key).';
CREATE TRIGGER rlmm_segments_truncate_epochs
    AFTER TRUNCATE ON rlmm_segments
    FOR EACH STATEMENT EXECUTE FUNCTION rlmm_segments_truncate_epochs();

ALTER TABLE rlmm_partitions
    DROP CONSTRAINT rlmm_partitions_partition_check,
    DROP CONSTRAINT rlmm_partitions_topic_check,
    DROP CONSTRAINT rlmm_partitions_version_check,
    DROP CONSTRAINT rlmm_partitions_max_epoch_span_check,
    DROP CONSTRAINT rlmm_partitions_delete_state_check,
    DROP CONSTRAINT rlmm_partitions_delete_fields_check;
ALTER TABLE rlmm_segments
    DROP CONSTRAINT rlmm_segments_state_check,
    DROP CONSTRAINT rlmm_segments_offsets_check,
    DROP CONSTRAINT rlmm_segments_size_check,
    DROP CONSTRAINT rlmm_segments_versions_check,
    DROP CONSTRAINT rlmm_segments_epochs_check;
ALTER TABLE rlmm_segment_epochs
    DROP CONSTRAINT rlmm_segment_epochs_epoch_check,
    DROP CONSTRAINT rlmm_segment_epochs_state_check,
    DROP CONSTRAINT rlmm_segment_epochs_range_check,
    DROP CONSTRAINT rlmm_segment_epochs_finished_check;
ALTER TABLE rlmm_epoch_ends
    DROP CONSTRAINT rlmm_epoch_ends_epoch_check,
    DROP CONSTRAINT rlmm_epoch_ends_end_offset_check,
    DROP CONSTRAINT rlmm_epoch_ends_max_segment_span_check;

-- Each function raises check_violation naming the rule (the old
-- constraint's name) and the values that broke it; a rule that evaluates to
-- NULL passes, as in a CHECK.
-- +goose StatementBegin
CREATE FUNCTION rlmm_partitions_valid(r rlmm_partitions) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    broken text;
    detail text;
BEGIN
    IF NOT (r.partition >= 0) THEN
        broken := 'rlmm_partitions_partition_check'; detail := format('partition %s is negative', r.partition);
    ELSIF NOT (r.topic ~ '^[a-zA-Z0-9._-]{1,249}$' AND r.topic NOT IN ('.', '..')) THEN
        broken := 'rlmm_partitions_topic_check'; detail := format('topic %L is not a Kafka topic name (1 to 249 of [a-zA-Z0-9._-], not "." or "..")', r.topic);
    ELSIF NOT (r.version >= 0) THEN
        broken := 'rlmm_partitions_version_check'; detail := format('version %s is negative', r.version);
    ELSIF NOT (r.max_epoch_span >= 0) THEN
        broken := 'rlmm_partitions_max_epoch_span_check'; detail := format('max_epoch_span %s is negative', r.max_epoch_span);
    ELSIF NOT (r.delete_state IN (0, 1, 2)) THEN
        broken := 'rlmm_partitions_delete_state_check'; detail := format('delete_state %s is not 0, 1, 2 or NULL', r.delete_state);
    ELSIF NOT ((r.delete_state IS NULL) = (r.delete_broker_id IS NULL)
               AND (r.delete_state IS NULL) = (r.delete_event_timestamp_ms IS NULL)) THEN
        broken := 'rlmm_partitions_delete_fields_check'; detail := 'delete_state, delete_broker_id and delete_event_timestamp_ms must be all NULL or all set';
    ELSE
        RETURN true;
    END IF;
    RAISE EXCEPTION USING
        ERRCODE = 'check_violation', CONSTRAINT = broken, TABLE = 'rlmm_partitions',
        MESSAGE = format('partition %s of topic %s (%s): %s (%s)', r.partition, r.topic, r.topic_id, detail, broken);
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION rlmm_partitions_valid(rlmm_partitions) IS 'The rules of a rlmm_partitions row (constraint rlmm_partitions_valid): raises check_violation naming the broken rule.';
ALTER TABLE rlmm_partitions ADD CONSTRAINT rlmm_partitions_valid CHECK (rlmm_partitions_valid(rlmm_partitions)) NOT VALID;
COMMENT ON CONSTRAINT rlmm_partitions_valid ON rlmm_partitions IS 'Every rule of a partition row, in rlmm_partitions_valid(); NOT VALID only because migration 00007 replaced equivalent constraints that had checked every existing row.';

-- +goose StatementBegin
CREATE FUNCTION rlmm_segments_valid(r rlmm_segments) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    broken text;
    detail text;
BEGIN
    IF NOT (r.state IN (0, 1, 2, 3)) THEN
        broken := 'rlmm_segments_state_check'; detail := format('state %s is not 0, 1, 2 or 3', r.state);
    ELSIF NOT (0 <= r.start_offset AND r.start_offset <= r.end_offset) THEN
        broken := 'rlmm_segments_offsets_check'; detail := format('start_offset %s and end_offset %s must satisfy 0 <= start_offset <= end_offset', r.start_offset, r.end_offset);
    ELSIF NOT (r.segment_size_bytes >= 0) THEN
        broken := 'rlmm_segments_size_check'; detail := format('segment_size_bytes %s is negative', r.segment_size_bytes);
    ELSIF NOT (r.added_version <= r.last_version
               AND (r.finished_version IS NULL OR (r.added_version < r.finished_version AND r.finished_version <= r.last_version))
               AND (r.state <> 1 OR r.finished_version IS NOT NULL)) THEN
        broken := 'rlmm_segments_versions_check';
        detail := format('added_version %s, finished_version %s and last_version %s must satisfy added <= last, added < finished <= last, and finished set in COPY_SEGMENT_FINISHED',
                         r.added_version, coalesce(r.finished_version::text, 'NULL'), r.last_version);
    ELSIF NOT (cardinality(r.epochs) >= 1
               AND cardinality(r.epochs) = cardinality(r.epoch_start_offsets)
               AND r.epoch_start_offsets[1] >= r.start_offset
               AND r.epoch_start_offsets[cardinality(r.epoch_start_offsets)] <= r.end_offset) THEN
        broken := 'rlmm_segments_epochs_check';
        detail := format('epochs %s and epoch_start_offsets %s must be non-empty, as long as each other, and start inside [%s, %s]',
                         r.epochs, r.epoch_start_offsets, r.start_offset, r.end_offset);
    ELSE
        RETURN true;
    END IF;
    RAISE EXCEPTION USING
        ERRCODE = 'check_violation', CONSTRAINT = broken, TABLE = 'rlmm_segments',
        MESSAGE = format('segment %s (topic %s, partition %s): %s (%s)', r.segment_id, r.topic, r.partition, detail, broken);
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION rlmm_segments_valid(rlmm_segments) IS 'The rules of a rlmm_segments row (constraint rlmm_segments_valid): raises check_violation naming the broken rule.';
ALTER TABLE rlmm_segments ADD CONSTRAINT rlmm_segments_valid CHECK (rlmm_segments_valid(rlmm_segments)) NOT VALID;
COMMENT ON CONSTRAINT rlmm_segments_valid ON rlmm_segments IS 'Every rule of a segment row, in rlmm_segments_valid(); NOT VALID only because migration 00007 replaced equivalent constraints that had checked every existing row.';

-- +goose StatementBegin
CREATE FUNCTION rlmm_segment_epochs_valid(r rlmm_segment_epochs) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    broken text;
    detail text;
BEGIN
    IF NOT (r.epoch >= 0) THEN
        broken := 'rlmm_segment_epochs_epoch_check'; detail := format('epoch %s is negative', r.epoch);
    ELSIF NOT (r.state IN (0, 1, 2, 3)) THEN
        broken := 'rlmm_segment_epochs_state_check'; detail := format('state %s is not 0, 1, 2 or 3', r.state);
    ELSIF NOT (r.segment_start_offset <= r.first_offset AND r.first_offset <= r.last_offset AND r.last_offset <= r.segment_end_offset) THEN
        broken := 'rlmm_segment_epochs_range_check';
        detail := format('first_offset %s and last_offset %s must lie in order inside the segment [%s, %s]',
                         r.first_offset, r.last_offset, r.segment_start_offset, r.segment_end_offset);
    ELSIF NOT (r.state <> 1 OR r.finished_version IS NOT NULL) THEN
        broken := 'rlmm_segment_epochs_finished_check'; detail := 'finished_version must be set in COPY_SEGMENT_FINISHED';
    ELSE
        RETURN true;
    END IF;
    RAISE EXCEPTION USING
        ERRCODE = 'check_violation', CONSTRAINT = broken, TABLE = 'rlmm_segment_epochs',
        MESSAGE = format('epoch %s of segment %s (partition %s): %s (%s)', r.epoch, r.segment_id, r.partition, detail, broken);
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION rlmm_segment_epochs_valid(rlmm_segment_epochs) IS 'The rules of a rlmm_segment_epochs row (constraint rlmm_segment_epochs_valid): raises check_violation naming the broken rule.';
ALTER TABLE rlmm_segment_epochs ADD CONSTRAINT rlmm_segment_epochs_valid CHECK (rlmm_segment_epochs_valid(rlmm_segment_epochs)) NOT VALID;
COMMENT ON CONSTRAINT rlmm_segment_epochs_valid ON rlmm_segment_epochs IS 'Every rule of an epoch row, in rlmm_segment_epochs_valid(); NOT VALID only because migration 00007 replaced equivalent constraints that had checked every existing row.';

-- +goose StatementBegin
CREATE FUNCTION rlmm_epoch_ends_valid(r rlmm_epoch_ends) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    broken text;
    detail text;
BEGIN
    IF NOT (r.epoch >= 0) THEN
        broken := 'rlmm_epoch_ends_epoch_check'; detail := format('epoch %s is negative', r.epoch);
    ELSIF NOT (r.end_offset >= 0) THEN
        broken := 'rlmm_epoch_ends_end_offset_check'; detail := format('end_offset %s is negative', r.end_offset);
    ELSIF NOT (r.max_segment_span >= 0) THEN
        broken := 'rlmm_epoch_ends_max_segment_span_check'; detail := format('max_segment_span %s is negative', r.max_segment_span);
    ELSE
        RETURN true;
    END IF;
    RAISE EXCEPTION USING
        ERRCODE = 'check_violation', CONSTRAINT = broken, TABLE = 'rlmm_epoch_ends',
        MESSAGE = format('epoch %s of partition %s (%s): %s (%s)', r.epoch, r.partition, r.topic_id, detail, broken);
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION rlmm_epoch_ends_valid(rlmm_epoch_ends) IS 'The rules of a rlmm_epoch_ends row (constraint rlmm_epoch_ends_valid): raises check_violation naming the broken rule.';
ALTER TABLE rlmm_epoch_ends ADD CONSTRAINT rlmm_epoch_ends_valid CHECK (rlmm_epoch_ends_valid(rlmm_epoch_ends)) NOT VALID;
COMMENT ON CONSTRAINT rlmm_epoch_ends_valid ON rlmm_epoch_ends IS 'Every rule of an epoch-end row, in rlmm_epoch_ends_valid(); NOT VALID only because migration 00007 replaced equivalent constraints that had checked every existing row.';

-- +goose Down
ALTER TABLE rlmm_epoch_ends DROP CONSTRAINT rlmm_epoch_ends_valid;
ALTER TABLE rlmm_segment_epochs DROP CONSTRAINT rlmm_segment_epochs_valid;
ALTER TABLE rlmm_segments DROP CONSTRAINT rlmm_segments_valid;
ALTER TABLE rlmm_partitions DROP CONSTRAINT rlmm_partitions_valid;
DROP FUNCTION rlmm_epoch_ends_valid(rlmm_epoch_ends);
DROP FUNCTION rlmm_segment_epochs_valid(rlmm_segment_epochs);
DROP FUNCTION rlmm_segments_valid(rlmm_segments);
DROP FUNCTION rlmm_partitions_valid(rlmm_partitions);
ALTER TABLE rlmm_partitions
    ADD CONSTRAINT rlmm_partitions_partition_check CHECK (partition >= 0),
    ADD CONSTRAINT rlmm_partitions_topic_check CHECK (topic ~ '^[a-zA-Z0-9._-]{1,249}$' AND topic NOT IN ('.', '..')),
    ADD CONSTRAINT rlmm_partitions_version_check CHECK (version >= 0),
    ADD CONSTRAINT rlmm_partitions_max_epoch_span_check CHECK (max_epoch_span >= 0),
    ADD CONSTRAINT rlmm_partitions_delete_state_check CHECK (delete_state IN (0, 1, 2)),
    ADD CONSTRAINT rlmm_partitions_delete_fields_check CHECK (
        (delete_state IS NULL) = (delete_broker_id IS NULL)
        AND (delete_state IS NULL) = (delete_event_timestamp_ms IS NULL));
ALTER TABLE rlmm_segments
    ADD CONSTRAINT rlmm_segments_state_check CHECK (state IN (0, 1, 2, 3)),
    ADD CONSTRAINT rlmm_segments_offsets_check CHECK (0 <= start_offset AND start_offset <= end_offset),
    ADD CONSTRAINT rlmm_segments_size_check CHECK (segment_size_bytes >= 0),
    ADD CONSTRAINT rlmm_segments_versions_check CHECK (
        added_version <= last_version
        AND (finished_version IS NULL OR (added_version < finished_version AND finished_version <= last_version))
        AND (state <> 1 OR finished_version IS NOT NULL)),
    ADD CONSTRAINT rlmm_segments_epochs_check CHECK (
        cardinality(epochs) >= 1
        AND cardinality(epochs) = cardinality(epoch_start_offsets)
        AND epoch_start_offsets[1] >= start_offset
        AND epoch_start_offsets[cardinality(epoch_start_offsets)] <= end_offset);
ALTER TABLE rlmm_segment_epochs
    ADD CONSTRAINT rlmm_segment_epochs_epoch_check CHECK (epoch >= 0),
    ADD CONSTRAINT rlmm_segment_epochs_state_check CHECK (state IN (0, 1, 2, 3)),
    ADD CONSTRAINT rlmm_segment_epochs_range_check CHECK (
        segment_start_offset <= first_offset AND first_offset <= last_offset AND last_offset <= segment_end_offset),
    ADD CONSTRAINT rlmm_segment_epochs_finished_check CHECK (state <> 1 OR finished_version IS NOT NULL);
ALTER TABLE rlmm_epoch_ends
    ADD CONSTRAINT rlmm_epoch_ends_epoch_check CHECK (epoch >= 0),
    ADD CONSTRAINT rlmm_epoch_ends_end_offset_check CHECK (end_offset >= 0),
    ADD CONSTRAINT rlmm_epoch_ends_max_segment_span_check CHECK (max_segment_span >= 0);
DROP TRIGGER rlmm_segments_truncate_epochs ON rlmm_segments;
DROP FUNCTION rlmm_segments_truncate_epochs();
DROP TRIGGER rlmm_segments_forget_epochs ON rlmm_segments;
DROP FUNCTION rlmm_segments_forget_epochs();
ALTER TABLE rlmm_segment_epochs ADD CONSTRAINT rlmm_segment_epochs_segment_fkey FOREIGN KEY (topic_id, partition, segment_id)
    REFERENCES rlmm_segments (topic_id, partition, segment_id) ON DELETE CASCADE;
