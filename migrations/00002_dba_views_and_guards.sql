-- +goose Up
-- For DBAs: readable views over the three tables, and guards that keep a
-- manual UPDATE inside the state machines of statemachine.go.
--
-- The state machines live in statemachine.go. The transition tables below
-- are a copy of them for the triggers; guard_test.go fails when the copy
-- and the Go code differ. Do not edit them by hand: a change to the state
-- machine is a new migration.
--
-- Every object is created unqualified, in the first schema of the
-- search_path (one schema per cluster), and the trigger functions reach the
-- other tables through the schema of the table that fired them.

CREATE TABLE rlmm_segment_states (
    state  smallint NOT NULL,
    name   text     NOT NULL,
    CONSTRAINT rlmm_segment_states_pkey PRIMARY KEY (state),
    CONSTRAINT rlmm_segment_states_name_key UNIQUE (name)
);
INSERT INTO rlmm_segment_states (state, name) VALUES
    (0, 'COPY_SEGMENT_STARTED'),
    (1, 'COPY_SEGMENT_FINISHED'),
    (2, 'DELETE_SEGMENT_STARTED'),
    (3, 'DELETE_SEGMENT_FINISHED');

COMMENT ON TABLE rlmm_segment_states IS 'The segment states: code (rlmm_segments.state) and name. Read-only; mirrors statemachine.go.';
COMMENT ON COLUMN rlmm_segment_states.state IS 'State code, as stored in rlmm_segments.state and rlmm_segment_epochs.state.';
COMMENT ON COLUMN rlmm_segment_states.name IS 'State name, as Kafka and the library spell it.';

CREATE TABLE rlmm_partition_delete_states (
    state  smallint NOT NULL,
    name   text     NOT NULL,
    CONSTRAINT rlmm_partition_delete_states_pkey PRIMARY KEY (state),
    CONSTRAINT rlmm_partition_delete_states_name_key UNIQUE (name)
);
INSERT INTO rlmm_partition_delete_states (state, name) VALUES
    (-1, 'NONE'),
    (0, 'DELETE_PARTITION_MARKED'),
    (1, 'DELETE_PARTITION_STARTED'),
    (2, 'DELETE_PARTITION_FINISHED');

COMMENT ON TABLE rlmm_partition_delete_states IS 'The partition-delete states: code (rlmm_partitions.delete_state) and name. -1 NONE stands for a NULL delete_state (no delete record). Read-only; mirrors statemachine.go.';
COMMENT ON COLUMN rlmm_partition_delete_states.state IS 'State code, as stored in rlmm_partitions.delete_state; -1 for NULL (none).';
COMMENT ON COLUMN rlmm_partition_delete_states.name IS 'State name, as Kafka and the library spell it.';

CREATE TABLE rlmm_segment_transitions (
    from_state  smallint NOT NULL,
    to_state    smallint NOT NULL,
    CONSTRAINT rlmm_segment_transitions_pkey PRIMARY KEY (from_state, to_state),
    CONSTRAINT rlmm_segment_transitions_from_fkey FOREIGN KEY (from_state) REFERENCES rlmm_segment_states (state),
    CONSTRAINT rlmm_segment_transitions_to_fkey FOREIGN KEY (to_state) REFERENCES rlmm_segment_states (state)
);
INSERT INTO rlmm_segment_transitions (from_state, to_state) VALUES
    (0, 1), (0, 2),
    (1, 1), (1, 2),
    (2, 2), (2, 3),
    (3, 3);

COMMENT ON TABLE rlmm_segment_transitions IS 'The segment transitions the state machine allows (self-transitions are idempotent retries): a copy of statemachine.go, checked against it by guard_test.go. The trigger rlmm_segments_state_guard refuses any UPDATE of rlmm_segments.state outside it. Read-only.';
COMMENT ON COLUMN rlmm_segment_transitions.from_state IS 'State the segment is in (rlmm_segment_states).';
COMMENT ON COLUMN rlmm_segment_transitions.to_state IS 'State it may move to (rlmm_segment_states).';

CREATE TABLE rlmm_partition_delete_transitions (
    from_state  smallint NOT NULL,
    to_state    smallint NOT NULL,
    CONSTRAINT rlmm_partition_delete_transitions_pkey PRIMARY KEY (from_state, to_state),
    CONSTRAINT rlmm_partition_delete_transitions_from_fkey FOREIGN KEY (from_state) REFERENCES rlmm_partition_delete_states (state),
    CONSTRAINT rlmm_partition_delete_transitions_to_fkey FOREIGN KEY (to_state) REFERENCES rlmm_partition_delete_states (state)
);
INSERT INTO rlmm_partition_delete_transitions (from_state, to_state) VALUES
    (-1, 0),
    (0, 0), (0, 1),
    (1, 1), (1, 2),
    (2, 2);

COMMENT ON TABLE rlmm_partition_delete_transitions IS 'The partition-delete transitions the state machine allows (-1: no delete record; self-transitions are idempotent retries): a copy of statemachine.go, checked against it by guard_test.go. The trigger rlmm_partitions_delete_state_guard refuses any UPDATE of rlmm_partitions.delete_state outside it. Read-only.';
COMMENT ON COLUMN rlmm_partition_delete_transitions.from_state IS 'Delete state the partition is in (rlmm_partition_delete_states; -1 none).';
COMMENT ON COLUMN rlmm_partition_delete_transitions.to_state IS 'Delete state it may move to (rlmm_partition_delete_states).';

-- The guards. Each fires only on a manual UPDATE that changes a state: the
-- library's statements enforce the transition table in their WHERE clause
-- and stamp the rows with the partition's next version (last_version), so
-- the WHEN clauses below skip them and the library's hot path pays nothing.
-- A manual UPDATE leaves last_version as it was (it must not set it).

-- +goose StatementBegin
CREATE FUNCTION rlmm_segments_state_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    allowed      boolean;
    from_name    text;
    to_name      text;
    targets      text;
    version      bigint;
    delete_state smallint;
BEGIN
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I.rlmm_segment_transitions WHERE from_state = $1 AND to_state = $2)',
                   TG_TABLE_SCHEMA)
        INTO allowed USING OLD.state, NEW.state;
    IF NOT allowed THEN
        EXECUTE format('SELECT (SELECT name FROM %1$I.rlmm_segment_states WHERE state = $1),
                               (SELECT name FROM %1$I.rlmm_segment_states WHERE state = $2),
                               (SELECT string_agg(st.name, '' or '' ORDER BY st.state)
                                FROM %1$I.rlmm_segment_transitions t
                                JOIN %1$I.rlmm_segment_states st ON st.state = t.to_state
                                WHERE t.from_state = $1 AND t.to_state <> $1)',
                       TG_TABLE_SCHEMA)
            INTO from_name, to_name, targets USING OLD.state, NEW.state;
        RAISE EXCEPTION USING
            ERRCODE = 'check_violation',
            CONSTRAINT = 'rlmm_segments_state_transition',
            MESSAGE = format('segment %s (topic %s, partition %s): %s -> %s is not an allowed transition; %s. Repair through the library: rlmmctl segments set-state %s <STATE>',
                             OLD.segment_id, OLD.topic, OLD.partition,
                             coalesce(from_name, 'state ' || OLD.state), coalesce(to_name, 'unknown state ' || NEW.state),
                             CASE WHEN targets IS NULL THEN format('a segment in %s never changes state again', from_name)
                                  ELSE format('from %s a segment may only move to %s', from_name, targets) END,
                             OLD.segment_id),
            HINT = 'The allowed transitions are in rlmm_segment_transitions (statemachine.go); see README, "Repairing by hand".';
    END IF;

    -- The library's statement stamps the segment with the partition's next
    -- version (last_version) itself. A write that does not, a manual
    -- UPDATE, gets the same bookkeeping here: the partition's version is
    -- bumped (which also locks the partition row, as the library does
    -- first), the segment stamped with it, and a notification sent at commit,
    -- so that CaughtUp and the managers' caches see the repair.
    IF NEW.last_version IS NOT DISTINCT FROM OLD.last_version THEN
        EXECUTE format('UPDATE %I.rlmm_partitions SET version = version + 1, updated_at = now()
                        WHERE topic_id = $1 AND partition = $2 RETURNING version, delete_state',
                       TG_TABLE_SCHEMA)
            INTO version, delete_state USING NEW.topic_id, NEW.partition;
        IF delete_state = 2 THEN
            RAISE EXCEPTION USING
                ERRCODE = 'check_violation',
                CONSTRAINT = 'rlmm_segments_state_transition',
                MESSAGE = format('segment %s (topic %s, partition %s): the partition''s delete finished (DELETE_PARTITION_FINISHED), so the segment is forgotten and its state can no longer change',
                                 OLD.segment_id, OLD.topic, OLD.partition);
        END IF;
        NEW.last_version := version;
        IF NEW.state = 1 THEN
            NEW.finished_version := coalesce(NEW.finished_version, version);
        END IF;
        NEW.updated_at := now();
        -- The epoch rows copy the segment's state (lookups read them). The
        -- library's own statement never reaches this trigger, so no other
        -- part of this statement updates them.
        EXECUTE format('UPDATE %I.rlmm_segment_epochs SET state = $4, finished_version = $5, last_version = $6
                        WHERE topic_id = $1 AND partition = $2 AND segment_id = $3',
                       TG_TABLE_SCHEMA)
            USING NEW.topic_id, NEW.partition, NEW.segment_id, NEW.state, NEW.finished_version, version;
        PERFORM pg_notify('rlmm_changes', NEW.topic_id::text || '/' || NEW.partition || '/' || version);
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION rlmm_segment_epochs_state_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    segment_state smallint;
BEGIN
    EXECUTE format('SELECT state FROM %I.rlmm_segments WHERE topic_id = $1 AND partition = $2 AND segment_id = $3',
                   TG_TABLE_SCHEMA)
        INTO segment_state USING NEW.topic_id, NEW.partition, NEW.segment_id;
    IF NEW.state IS DISTINCT FROM segment_state THEN
        RAISE EXCEPTION USING
            ERRCODE = 'check_violation',
            CONSTRAINT = 'rlmm_segment_epochs_state_follows_segment',
            MESSAGE = format('segment %s, epoch %s: rlmm_segment_epochs.state copies the segment''s state (%s) and cannot be set to %s on its own. Update rlmm_segments.state instead (the epoch rows follow it), or repair through the library: rlmmctl segments set-state %s <STATE>',
                             NEW.segment_id, NEW.epoch, coalesce(segment_state::text, 'no segment'), NEW.state, NEW.segment_id),
            HINT = 'See README, "Repairing by hand".';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION rlmm_partitions_delete_state_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    allowed   boolean;
    from_name text;
    to_name   text;
    targets   text;
BEGIN
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I.rlmm_partition_delete_transitions WHERE from_state = $1 AND to_state = $2)',
                   TG_TABLE_SCHEMA)
        INTO allowed USING coalesce(OLD.delete_state, -1), coalesce(NEW.delete_state, -1);
    IF NOT allowed THEN
        EXECUTE format('SELECT (SELECT name FROM %1$I.rlmm_partition_delete_states WHERE state = $1),
                               (SELECT name FROM %1$I.rlmm_partition_delete_states WHERE state = $2),
                               (SELECT string_agg(st.name, '' or '' ORDER BY st.state)
                                FROM %1$I.rlmm_partition_delete_transitions t
                                JOIN %1$I.rlmm_partition_delete_states st ON st.state = t.to_state
                                WHERE t.from_state = $1 AND t.to_state <> $1)',
                       TG_TABLE_SCHEMA)
            INTO from_name, to_name, targets USING coalesce(OLD.delete_state, -1), coalesce(NEW.delete_state, -1);
        RAISE EXCEPTION USING
            ERRCODE = 'check_violation',
            CONSTRAINT = 'rlmm_partitions_delete_state_transition',
            MESSAGE = format('partition %s-%s (topic id %s): delete state %s -> %s is not an allowed transition; %s. Repair through the library: rlmmctl partitions set-delete-state --topic-id %s --partition %s <STATE>',
                             OLD.topic, OLD.partition, OLD.topic_id,
                             coalesce(from_name, 'state ' || OLD.delete_state), coalesce(to_name, 'unknown state ' || NEW.delete_state),
                             CASE WHEN targets IS NULL THEN format('a partition in %s never changes delete state again', from_name)
                                  ELSE format('from %s a partition may only move to %s', from_name, targets) END,
                             OLD.topic_id, OLD.partition),
            HINT = 'The allowed transitions are in rlmm_partition_delete_transitions (statemachine.go); see README, "Repairing by hand".';
    END IF;
    -- The library bumps the version in the same UPDATE; a manual UPDATE
    -- that does not is bumped here, and notified at commit, so that CaughtUp
    -- and the managers' caches see the repair.
    IF NEW.version = OLD.version THEN
        NEW.version := OLD.version + 1;
        NEW.updated_at := now();
        PERFORM pg_notify('rlmm_changes', NEW.topic_id::text || '/' || NEW.partition || '/' || NEW.version);
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER rlmm_segments_state_guard
    BEFORE UPDATE OF state ON rlmm_segments
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state AND OLD.last_version IS NOT DISTINCT FROM NEW.last_version)
    EXECUTE FUNCTION rlmm_segments_state_guard();
CREATE TRIGGER rlmm_segment_epochs_state_guard
    BEFORE UPDATE OF state ON rlmm_segment_epochs
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state AND OLD.last_version IS NOT DISTINCT FROM NEW.last_version)
    EXECUTE FUNCTION rlmm_segment_epochs_state_guard();
CREATE TRIGGER rlmm_partitions_delete_state_guard
    BEFORE UPDATE OF delete_state ON rlmm_partitions
    FOR EACH ROW WHEN (OLD.delete_state IS DISTINCT FROM NEW.delete_state)
    EXECUTE FUNCTION rlmm_partitions_delete_state_guard();

COMMENT ON FUNCTION rlmm_segments_state_guard() IS 'Trigger rlmm_segments_state_guard: refuses a change of rlmm_segments.state outside rlmm_segment_transitions, naming the segment, both states and the legal repair; gives a manual change the library''s bookkeeping (partition version, last_version, finished_version, notification).';
COMMENT ON FUNCTION rlmm_segment_epochs_state_guard() IS 'Trigger rlmm_segment_epochs_state_guard: refuses a change of rlmm_segment_epochs.state that differs from its segment''s state.';
COMMENT ON FUNCTION rlmm_partitions_delete_state_guard() IS 'Trigger rlmm_partitions_delete_state_guard: refuses a change of rlmm_partitions.delete_state outside rlmm_partition_delete_transitions; bumps the version of a manual change and notifies it.';

-- DBAs look partitions up by topic name.
CREATE INDEX rlmm_partitions_topic_idx ON rlmm_partitions (topic, partition);

-- The views. Names first, codes and ids last; every size twice, readable
-- and in bytes.

CREATE VIEW rlmm_segments_v AS
SELECT p.topic,
       s.partition,
       s.segment_id,
       st.name AS state,
       (s.state = 3 OR p.delete_state IS NOT DISTINCT FROM 2) AS forgotten,
       s.start_offset,
       s.end_offset,
       (s.end_offset - s.start_offset + 1)::bigint AS offset_count,
       (SELECT string_agg(u.epoch || ':' || u.start_offset, ', ' ORDER BY u.epoch)
        FROM unnest(s.epochs, s.epoch_start_offsets) AS u (epoch, start_offset))::text AS epochs,
       pg_size_pretty(s.segment_size_bytes::bigint) AS size,
       s.segment_size_bytes AS size_bytes,
       s.broker_id,
       to_timestamp(s.event_timestamp_ms / 1000.0)::timestamptz AS event_time,
       to_timestamp(s.max_timestamp_ms / 1000.0)::timestamptz AS max_timestamp,
       s.txn_index_empty,
       coalesce(octet_length(s.custom_metadata), 0) AS custom_metadata_bytes,
       pds.name AS partition_delete_state,
       s.created_at,
       s.updated_at,
       s.topic_id,
       s.state AS state_code
FROM rlmm_segments s
JOIN rlmm_partitions p ON p.topic_id = s.topic_id AND p.partition = s.partition
JOIN rlmm_segment_states st ON st.state = s.state
JOIN rlmm_partition_delete_states pds ON pds.state = coalesce(p.delete_state, -1);

COMMENT ON VIEW rlmm_segments_v IS 'One row per segment ever added (forgotten ones too), readable: state names, sizes, epochs as text, times as timestamps.';
COMMENT ON COLUMN rlmm_segments_v.topic IS 'Topic name.';
COMMENT ON COLUMN rlmm_segments_v.partition IS 'Partition number.';
COMMENT ON COLUMN rlmm_segments_v.segment_id IS 'Segment id (rlmm_segments.segment_id).';
COMMENT ON COLUMN rlmm_segments_v.state IS 'Segment state name: COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED (the only one lookups see), DELETE_SEGMENT_STARTED, DELETE_SEGMENT_FINISHED.';
COMMENT ON COLUMN rlmm_segments_v.forgotten IS 'True when no query of the library returns the segment any more: DELETE_SEGMENT_FINISHED, or its partition''s delete finished. The row stays so the id stays taken (rlmmctl purge reclaims it).';
COMMENT ON COLUMN rlmm_segments_v.start_offset IS 'First offset in the segment.';
COMMENT ON COLUMN rlmm_segments_v.end_offset IS 'Last offset in the segment (inclusive).';
COMMENT ON COLUMN rlmm_segments_v.offset_count IS 'Number of offsets the segment spans: end_offset - start_offset + 1.';
COMMENT ON COLUMN rlmm_segments_v.epochs IS 'Leader epochs and the first offset of each in the segment, as epoch:first_offset, e.g. ''0:0, 1:20''.';
COMMENT ON COLUMN rlmm_segments_v.size IS 'Segment size in remote storage, readable (pg_size_pretty).';
COMMENT ON COLUMN rlmm_segments_v.size_bytes IS 'Segment size in remote storage, in bytes.';
COMMENT ON COLUMN rlmm_segments_v.broker_id IS 'Broker that wrote the latest state.';
COMMENT ON COLUMN rlmm_segments_v.event_time IS 'Event time of the latest state (from event_timestamp_ms).';
COMMENT ON COLUMN rlmm_segments_v.max_timestamp IS 'Largest record timestamp in the segment (from max_timestamp_ms).';
COMMENT ON COLUMN rlmm_segments_v.txn_index_empty IS 'True when the segment has no transaction index entries.';
COMMENT ON COLUMN rlmm_segments_v.custom_metadata_bytes IS 'Size of the custom metadata in bytes; 0: none.';
COMMENT ON COLUMN rlmm_segments_v.partition_delete_state IS 'Delete state of the segment''s partition: NONE, DELETE_PARTITION_MARKED, DELETE_PARTITION_STARTED or DELETE_PARTITION_FINISHED.';
COMMENT ON COLUMN rlmm_segments_v.created_at IS 'When the segment was added.';
COMMENT ON COLUMN rlmm_segments_v.updated_at IS 'When the segment was last written to.';
COMMENT ON COLUMN rlmm_segments_v.topic_id IS 'Topic id (UUID).';
COMMENT ON COLUMN rlmm_segments_v.state_code IS 'Segment state code, as stored (rlmm_segment_states).';

CREATE VIEW rlmm_segment_epochs_v AS
SELECT p.topic,
       e.partition,
       e.epoch,
       e.first_offset,
       e.last_offset,
       (e.last_offset - e.first_offset + 1)::bigint AS offset_count,
       e.segment_id,
       st.name AS state,
       (e.state = 1 AND p.delete_state IS DISTINCT FROM 2) AS answers_lookups,
       e.segment_start_offset,
       e.segment_end_offset,
       e.finished_version,
       e.topic_id
FROM rlmm_segment_epochs e
JOIN rlmm_partitions p ON p.topic_id = e.topic_id AND p.partition = e.partition
JOIN rlmm_segment_states st ON st.state = e.state;

COMMENT ON VIEW rlmm_segment_epochs_v IS 'One row per (segment, leader epoch): the offsets of that epoch inside the segment, which is what offset lookups match against.';
COMMENT ON COLUMN rlmm_segment_epochs_v.topic IS 'Topic name.';
COMMENT ON COLUMN rlmm_segment_epochs_v.partition IS 'Partition number.';
COMMENT ON COLUMN rlmm_segment_epochs_v.epoch IS 'Leader epoch.';
COMMENT ON COLUMN rlmm_segment_epochs_v.first_offset IS 'First offset of the epoch inside the segment.';
COMMENT ON COLUMN rlmm_segment_epochs_v.last_offset IS 'Last offset of the epoch inside the segment (inclusive).';
COMMENT ON COLUMN rlmm_segment_epochs_v.offset_count IS 'Number of offsets of the epoch inside the segment.';
COMMENT ON COLUMN rlmm_segment_epochs_v.segment_id IS 'The segment (rlmm_segments_v.segment_id).';
COMMENT ON COLUMN rlmm_segment_epochs_v.state IS 'State name of the segment.';
COMMENT ON COLUMN rlmm_segment_epochs_v.answers_lookups IS 'True when lookups of this epoch may return the segment: COPY_SEGMENT_FINISHED, and its partition''s delete has not finished.';
COMMENT ON COLUMN rlmm_segment_epochs_v.segment_start_offset IS 'First offset of the whole segment.';
COMMENT ON COLUMN rlmm_segment_epochs_v.segment_end_offset IS 'Last offset of the whole segment (what HighestOffsetForEpoch returns).';
COMMENT ON COLUMN rlmm_segment_epochs_v.finished_version IS 'Partition version of the segment''s first COPY_SEGMENT_FINISHED: among overlapping ranges that start at the same offset, the latest wins a lookup.';
COMMENT ON COLUMN rlmm_segment_epochs_v.topic_id IS 'Topic id (UUID).';

CREATE VIEW rlmm_partitions_v AS
SELECT p.topic,
       p.partition,
       c.copy_started,
       c.copy_finished,
       c.delete_started,
       c.delete_finished,
       pg_size_pretty(c.live_bytes) AS size,
       c.live_bytes AS size_bytes,
       pds.name AS delete_state,
       p.delete_broker_id,
       to_timestamp(p.delete_event_timestamp_ms / 1000.0)::timestamptz AS delete_event_time,
       p.version,
       greatest(p.updated_at, c.last_segment_change)::timestamptz AS last_change,
       p.created_at,
       p.topic_id,
       p.delete_state AS delete_state_code
FROM rlmm_partitions p
JOIN rlmm_partition_delete_states pds ON pds.state = coalesce(p.delete_state, -1)
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE s.state = 0) AS copy_started,
           count(*) FILTER (WHERE s.state = 1) AS copy_finished,
           count(*) FILTER (WHERE s.state = 2) AS delete_started,
           count(*) FILTER (WHERE s.state = 3) AS delete_finished,
           CASE WHEN p.delete_state IS NOT DISTINCT FROM 2 THEN 0
                ELSE coalesce(sum(s.segment_size_bytes) FILTER (WHERE s.state IN (0, 1, 2)), 0)
           END::bigint AS live_bytes,
           max(s.updated_at) AS last_segment_change
    FROM rlmm_segments s
    WHERE s.topic_id = p.topic_id AND s.partition = p.partition
) c;

COMMENT ON VIEW rlmm_partitions_v IS 'One row per partition: its segments per state, the bytes it holds in remote storage, its delete state, version and last change.';
COMMENT ON COLUMN rlmm_partitions_v.topic IS 'Topic name.';
COMMENT ON COLUMN rlmm_partitions_v.partition IS 'Partition number.';
COMMENT ON COLUMN rlmm_partitions_v.copy_started IS 'Segments in COPY_SEGMENT_STARTED (being uploaded).';
COMMENT ON COLUMN rlmm_partitions_v.copy_finished IS 'Segments in COPY_SEGMENT_FINISHED (the ones lookups see).';
COMMENT ON COLUMN rlmm_partitions_v.delete_started IS 'Segments in DELETE_SEGMENT_STARTED (being deleted from remote storage).';
COMMENT ON COLUMN rlmm_partitions_v.delete_finished IS 'Segments in DELETE_SEGMENT_FINISHED (forgotten, rows kept until rlmmctl purge).';
COMMENT ON COLUMN rlmm_partitions_v.size IS 'Summed size of the segments not forgotten, readable (pg_size_pretty): what remote storage holds, or is copying or deleting, for the partition.';
COMMENT ON COLUMN rlmm_partitions_v.size_bytes IS 'The same size in bytes.';
COMMENT ON COLUMN rlmm_partitions_v.delete_state IS 'Partition delete state name: NONE, DELETE_PARTITION_MARKED, DELETE_PARTITION_STARTED or DELETE_PARTITION_FINISHED.';
COMMENT ON COLUMN rlmm_partitions_v.delete_broker_id IS 'Broker that wrote the latest partition-delete record; NULL: none.';
COMMENT ON COLUMN rlmm_partitions_v.delete_event_time IS 'Event time of the latest partition-delete record; NULL: none.';
COMMENT ON COLUMN rlmm_partitions_v.version IS 'Committed version of the partition, bumped by every write to it (CaughtUp compares it).';
COMMENT ON COLUMN rlmm_partitions_v.last_change IS 'Time of the last write to the partition or any of its segments.';
COMMENT ON COLUMN rlmm_partitions_v.created_at IS 'When the partition was first written to.';
COMMENT ON COLUMN rlmm_partitions_v.topic_id IS 'Topic id (UUID).';
COMMENT ON COLUMN rlmm_partitions_v.delete_state_code IS 'Partition delete state code, as stored; NULL: none.';

-- +goose Down
DROP VIEW rlmm_partitions_v;
DROP VIEW rlmm_segment_epochs_v;
DROP VIEW rlmm_segments_v;
DROP INDEX rlmm_partitions_topic_idx;
DROP TRIGGER rlmm_partitions_delete_state_guard ON rlmm_partitions;
DROP TRIGGER rlmm_segment_epochs_state_guard ON rlmm_segment_epochs;
DROP TRIGGER rlmm_segments_state_guard ON rlmm_segments;
DROP FUNCTION rlmm_partitions_delete_state_guard();
DROP FUNCTION rlmm_segment_epochs_state_guard();
DROP FUNCTION rlmm_segments_state_guard();
DROP TABLE rlmm_partition_delete_transitions;
DROP TABLE rlmm_segment_transitions;
DROP TABLE rlmm_partition_delete_states;
DROP TABLE rlmm_segment_states;
