-- +goose Up
-- Release 1's baseline: the whole schema of release 1, in the first schema
-- of the search path. A new database gets it from this one file.
--
-- A database migrated by the pre-release chain of migrations (00001 to
-- 00018, at 18) is moved onto it without losing a row: its data tables are
-- set aside in a schema of their own, every object of theirs dropped, the
-- baseline created, the rows copied in (through the baseline's constraints),
-- the privileges granted on same-named tables, views and functions granted
-- again, and the set-aside schema dropped; every cache reloads afterwards
-- (rlmm_data_generation). A database at an older pre-release version is
-- refused: take it to 18 with the code of that chain first. Code of the
-- chain refuses this schema (no "-- rlmm:compatible-with" line): brokers
-- upgrade to release 1 before the database does (docs/MIGRATIONS.md).
--
-- What is here, and why:
--   - the data tables' rules are plain CHECK constraints and a real
--     foreign key. A rule of one value is the CHECK of a domain, the
--     column's type (rlmm_offset, ...): PostgreSQL plans a domain's check
--     once per connection and an UPDATE checks only the columns it sets,
--     where a table's CHECK is planned again by every statement that
--     writes the table and checked for every row it writes. A rule over
--     several columns is a table CHECK. Each epoch row names its segment by
--     segment_id, which rlmm_segments_segment_id_key answers, and goes with
--     it (ON DELETE CASCADE, which the epoch rows' primary key
--     (segment_id, epoch) answers);
--   - the library's writes do all their bookkeeping (versions, epoch rows,
--     notifications) in their own statements, and so do the repair
--     functions;
--   - one row per segment: a segment of one leader epoch (most of them)
--     is indexed by that epoch on rlmm_segments itself; only a segment
--     that spans several epochs has epoch rows (rlmm_segment_epochs), so
--     most writes touch two tables. Lookups walk the segments by start
--     offset and read each one's epoch at the offset from its arrays;
--   - EpochEndOffset reads the finished segments and epoch rows themselves
--     (a descent of each's ends index), so no write raises a high-water
--     mark: rlmm_epoch_ends keeps only the ends of the segments the purge
--     deleted, which rlmm_purge_round folds in as it deletes them. No
--     trigger does bookkeeping; the triggers left only refuse raw DML that
--     would break what the library relies on;
--   - repairs are SECURITY DEFINER functions: rlmm_set_segment_state,
--     rlmm_set_partition_delete_state, rlmm_purge, rlmm_resync (docs/DBA.md).

-- +goose StatementBegin
DO $pre_release$
DECLARE
    applied bigint;
    aside text := left(current_schema(), 40) || '_rlmm_pre_release';
    t text;
    f regprocedure;
BEGIN
    IF to_regclass('rlmm_segments') IS NULL THEN
        RETURN; -- a new database
    END IF;
    SELECT max(v.version_id) INTO applied FROM rlmm_goose_db_version v WHERE v.is_applied AND v.version_id < 19;
    IF applied IS DISTINCT FROM 18 THEN
        RAISE EXCEPTION USING ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = format('schema %s of database %s is at pre-release version %s; release 1''s baseline moves only a database at 18, the last pre-release version: migrate it to 18 with the code of the pre-release chain first',
                             current_schema(), current_database(), coalesce(applied::text, 'none')),
            HINT = 'See docs/MIGRATIONS.md, "Release 1".';
    END IF;
    -- Privileges on what keeps its name, to grant again once it exists.
    CREATE TEMP TABLE rlmm_pre_release_grants ON COMMIT DROP AS
    SELECT 'TABLE' AS kind, c.relname::text AS name, a.grantee, a.privilege_type, a.is_grantable
    FROM pg_class c, aclexplode(c.relacl) a
    WHERE c.relnamespace = current_schema()::regnamespace AND c.relname LIKE 'rlmm\_%' AND c.relkind IN ('r', 'v')
      AND a.grantee <> c.relowner
    UNION ALL
    SELECT 'FUNCTION', p.proname::text, a.grantee, a.privilege_type, a.is_grantable
    FROM pg_proc p, aclexplode(p.proacl) a
    WHERE p.pronamespace = current_schema()::regnamespace AND p.proname LIKE 'rlmm\_%'
      AND a.grantee <> p.proowner;
    DROP VIEW rlmm_segments_v, rlmm_segment_epochs_v, rlmm_partitions_v, rlmm_stuck_v;
    DROP TABLE rlmm_segment_states, rlmm_segment_transitions, rlmm_partition_delete_states, rlmm_partition_delete_transitions;
    EXECUTE format('CREATE SCHEMA %I', aside);
    FOREACH t IN ARRAY ARRAY['rlmm_partitions', 'rlmm_segments', 'rlmm_segment_epochs', 'rlmm_epoch_ends', 'rlmm_data_generation'] LOOP
        EXECUTE format('ALTER TABLE %I SET SCHEMA %I', t, aside);
    END LOOP;
    -- Every function of the chain, and with them its triggers and the
    -- CHECK constraints that called them.
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
             WHERE p.pronamespace = current_schema()::regnamespace AND p.proname LIKE 'rlmm\_%' LOOP
        EXECUTE format('DROP FUNCTION %s CASCADE', f);
    END LOOP;
END
$pre_release$;
-- +goose StatementEnd

-- The state machine, as statemachine.go spells it (statemachine_test.go
-- compares them). Read-only: the repair functions read them.
CREATE TABLE rlmm_segment_states (
    state smallint PRIMARY KEY,
    name  text NOT NULL UNIQUE
);
INSERT INTO rlmm_segment_states (state, name) VALUES
    (0, 'COPY_SEGMENT_STARTED'), (1, 'COPY_SEGMENT_FINISHED'), (2, 'DELETE_SEGMENT_STARTED'), (3, 'DELETE_SEGMENT_FINISHED');
COMMENT ON TABLE rlmm_segment_states IS 'The segment states: code (rlmm_segments.state) and name, as Kafka spells it. Read-only; mirrors statemachine.go.';
COMMENT ON COLUMN rlmm_segment_states.state IS 'State code, as stored in rlmm_segments.state and rlmm_segment_epochs.state.';
COMMENT ON COLUMN rlmm_segment_states.name IS 'State name, as Kafka and the library spell it.';

CREATE TABLE rlmm_segment_transitions (
    from_state smallint NOT NULL,
    to_state   smallint NOT NULL,
    PRIMARY KEY (from_state, to_state)
);
INSERT INTO rlmm_segment_transitions (from_state, to_state) VALUES
    (0, 1), (0, 2), (1, 1), (1, 2), (2, 2), (2, 3), (3, 3);
COMMENT ON TABLE rlmm_segment_transitions IS 'The segment transitions the state machine allows (self-transitions are idempotent retries): a copy of statemachine.go, which rlmm_set_segment_state checks. Read-only.';
COMMENT ON COLUMN rlmm_segment_transitions.from_state IS 'State the segment is in (rlmm_segment_states).';
COMMENT ON COLUMN rlmm_segment_transitions.to_state IS 'State it may move to (rlmm_segment_states).';

CREATE TABLE rlmm_partition_delete_states (
    state smallint PRIMARY KEY,
    name  text NOT NULL UNIQUE
);
INSERT INTO rlmm_partition_delete_states (state, name) VALUES
    (-1, 'NONE'), (0, 'DELETE_PARTITION_MARKED'), (1, 'DELETE_PARTITION_STARTED'), (2, 'DELETE_PARTITION_FINISHED');
COMMENT ON TABLE rlmm_partition_delete_states IS 'The partition-delete states: code (rlmm_partitions.delete_state) and name; -1 NONE stands for a NULL delete_state. Read-only; mirrors statemachine.go.';
COMMENT ON COLUMN rlmm_partition_delete_states.state IS 'State code, as stored in rlmm_partitions.delete_state; -1 for NULL (none).';
COMMENT ON COLUMN rlmm_partition_delete_states.name IS 'State name, as Kafka and the library spell it.';

CREATE TABLE rlmm_partition_delete_transitions (
    from_state smallint NOT NULL,
    to_state   smallint NOT NULL,
    PRIMARY KEY (from_state, to_state)
);
INSERT INTO rlmm_partition_delete_transitions (from_state, to_state) VALUES
    (-1, 0), (0, 0), (0, 1), (1, 1), (1, 2), (2, 2);
COMMENT ON TABLE rlmm_partition_delete_transitions IS 'The partition-delete transitions the state machine allows (-1: no delete record; self-transitions are idempotent retries): a copy of statemachine.go, which rlmm_set_partition_delete_state checks. Read-only.';
COMMENT ON COLUMN rlmm_partition_delete_transitions.from_state IS 'Delete state the partition is in (rlmm_partition_delete_states; -1 none).';
COMMENT ON COLUMN rlmm_partition_delete_transitions.to_state IS 'Delete state it may move to (rlmm_partition_delete_states).';

-- The rules of one value, each a domain's CHECK (see the top).
CREATE DOMAIN rlmm_partition_number AS integer CONSTRAINT rlmm_partition_number_check CHECK (VALUE >= 0);
COMMENT ON DOMAIN rlmm_partition_number IS 'A Kafka partition number: 0 or more.';
CREATE DOMAIN rlmm_topic_name AS text CONSTRAINT rlmm_topic_name_check CHECK (length(VALUE) BETWEEN 1 AND 249
    AND VALUE NOT IN ('.', '..') AND ltrim(VALUE, 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-') = '');
COMMENT ON DOMAIN rlmm_topic_name IS 'A Kafka topic name: 1 to 249 of [a-zA-Z0-9._-], not "." or "..".';
CREATE DOMAIN rlmm_count AS bigint CONSTRAINT rlmm_count_check CHECK (VALUE >= 0);
COMMENT ON DOMAIN rlmm_count IS 'A partition''s version or a span of offsets: 0 or more.';
CREATE DOMAIN rlmm_offset AS bigint CONSTRAINT rlmm_offset_check CHECK (VALUE >= 0);
COMMENT ON DOMAIN rlmm_offset IS 'A Kafka offset: 0 or more.';
CREATE DOMAIN rlmm_epoch AS integer CONSTRAINT rlmm_epoch_check CHECK (VALUE >= 0);
COMMENT ON DOMAIN rlmm_epoch IS 'A leader epoch: 0 or more.';
CREATE DOMAIN rlmm_size AS integer CONSTRAINT rlmm_size_check CHECK (VALUE >= 0);
COMMENT ON DOMAIN rlmm_size IS 'A segment''s size in bytes: 0 or more.';
CREATE DOMAIN rlmm_segment_state AS smallint CONSTRAINT rlmm_segment_state_check CHECK (VALUE IN (0, 1, 2, 3));
COMMENT ON DOMAIN rlmm_segment_state IS 'A segment state (rlmm_segment_states): 0 COPY_SEGMENT_STARTED, 1 COPY_SEGMENT_FINISHED, 2 DELETE_SEGMENT_STARTED, 3 DELETE_SEGMENT_FINISHED.';
CREATE DOMAIN rlmm_delete_state AS smallint CONSTRAINT rlmm_delete_state_check CHECK (VALUE IN (0, 1, 2));
COMMENT ON DOMAIN rlmm_delete_state IS 'A partition-delete state (rlmm_partition_delete_states): 0 DELETE_PARTITION_MARKED, 1 DELETE_PARTITION_STARTED, 2 DELETE_PARTITION_FINISHED.';

CREATE TABLE rlmm_partitions (
    topic_id                  uuid NOT NULL,
    partition                 rlmm_partition_number NOT NULL,
    topic                     rlmm_topic_name NOT NULL,
    version                   rlmm_count NOT NULL DEFAULT 0,
    max_segment_span          rlmm_count NOT NULL DEFAULT 0,
    delete_state              rlmm_delete_state,
    delete_broker_id          integer,
    delete_event_timestamp_ms bigint,
    created_at                timestamptz NOT NULL DEFAULT now(),
    updated_at                timestamptz NOT NULL DEFAULT now(),
    vanished_version          rlmm_count NOT NULL DEFAULT 0,
    PRIMARY KEY (topic_id, partition),
    CONSTRAINT rlmm_partitions_delete_fields_check CHECK ((delete_state IS NULL) = (delete_broker_id IS NULL)
        AND (delete_state IS NULL) = (delete_event_timestamp_ms IS NULL))
) WITH (fillfactor = 50);
CREATE INDEX rlmm_partitions_topic_idx ON rlmm_partitions (topic, partition);
CREATE INDEX rlmm_partitions_deleting_idx ON rlmm_partitions (delete_state) WHERE delete_state IN (0, 1);
CREATE INDEX rlmm_partitions_deleted_idx ON rlmm_partitions (topic_id, partition) WHERE delete_state = 2;
COMMENT ON INDEX rlmm_partitions_deleted_idx IS 'The partitions in DELETE_PARTITION_FINISHED: what rlmm_purge reads.';
COMMENT ON TABLE rlmm_partitions IS 'One row per topic partition that has ever had a segment or a partition-delete record: its delete state and its committed version. Every write to the partition locks this row first.';
COMMENT ON COLUMN rlmm_partitions.topic_id IS 'Kafka topic id (with partition, the identity of the partition).';
COMMENT ON COLUMN rlmm_partitions.partition IS 'Kafka partition number.';
COMMENT ON COLUMN rlmm_partitions.created_at IS 'When the row was created.';
COMMENT ON COLUMN rlmm_partitions.updated_at IS 'When the partition was last written to.';
COMMENT ON COLUMN rlmm_partitions.topic IS 'Topic name, as the first write named it.';
COMMENT ON COLUMN rlmm_partitions.version IS 'Committed position of the partition: bumped by every write to it. CaughtUp and the caches compare it.';
COMMENT ON COLUMN rlmm_partitions.max_segment_span IS 'Largest end_offset - start_offset of any segment ever added: a lookup walks back from an offset to offset - max_segment_span, FirstSegmentForTimestamp from startingOffset - max_segment_span.';
COMMENT ON COLUMN rlmm_partitions.delete_state IS 'NULL none, 0 DELETE_PARTITION_MARKED, 1 DELETE_PARTITION_STARTED, 2 DELETE_PARTITION_FINISHED (every segment forgotten).';
COMMENT ON COLUMN rlmm_partitions.delete_broker_id IS 'Broker that wrote the latest partition-delete record.';
COMMENT ON COLUMN rlmm_partitions.delete_event_timestamp_ms IS 'Event time (ms since the epoch) of the latest partition-delete record.';
COMMENT ON COLUMN rlmm_partitions.vanished_version IS 'Largest version at which segment rows of the partition were deleted (rlmm_purge): a cache older than it cannot catch up by the change feed and reloads the partition. 0: none.';

CREATE TABLE rlmm_segments (
    topic_id            uuid NOT NULL,
    partition           integer NOT NULL,
    segment_id          uuid NOT NULL,
    topic               text NOT NULL,
    start_offset        rlmm_offset NOT NULL,
    end_offset          bigint NOT NULL,
    max_timestamp_ms    bigint NOT NULL,
    broker_id           integer NOT NULL,
    event_timestamp_ms  bigint NOT NULL,
    segment_size_bytes  rlmm_size NOT NULL,
    custom_metadata     bytea,
    state               rlmm_segment_state NOT NULL,
    txn_index_empty     boolean NOT NULL,
    epochs              integer[] NOT NULL,
    epoch_start_offsets bigint[] NOT NULL,
    added_version       bigint NOT NULL,
    finished_version    bigint,
    last_version        bigint NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (topic_id, partition, segment_id),
    CONSTRAINT rlmm_segments_offsets_check CHECK (start_offset <= end_offset),
    CONSTRAINT rlmm_segments_versions_check CHECK (added_version <= last_version
        AND (finished_version IS NULL OR (added_version < finished_version AND finished_version <= last_version))
        AND (state <> 1 OR finished_version IS NOT NULL)),
    CONSTRAINT rlmm_segments_epochs_check CHECK (cardinality(epochs) >= 1
        AND cardinality(epochs) = cardinality(epoch_start_offsets)
        AND epoch_start_offsets[1] >= start_offset
        AND epoch_start_offsets[cardinality(epoch_start_offsets)] <= end_offset)
);
CREATE UNIQUE INDEX rlmm_segments_segment_id_key ON rlmm_segments (segment_id);
CREATE INDEX rlmm_segments_changes_idx ON rlmm_segments (topic_id, partition, last_version);
CREATE INDEX rlmm_segments_list_idx ON rlmm_segments (topic_id, partition, start_offset, added_version) WHERE state IN (0, 1, 2);
CREATE INDEX rlmm_segments_in_flight_idx ON rlmm_segments (updated_at) WHERE state IN (0, 2);
CREATE INDEX rlmm_segments_forgotten_idx ON rlmm_segments (updated_at) WHERE state = 3;
-- A segment of one leader epoch (most of them) has no epoch row: these
-- index it by that epoch, as the epoch rows' indexes do the others.
CREATE INDEX rlmm_segments_epoch_list_idx ON rlmm_segments (topic_id, partition, (epochs[1]), start_offset, added_version)
    WHERE state IN (0, 1, 2) AND cardinality(epochs) = 1;
CREATE INDEX rlmm_segments_epoch_highest_idx ON rlmm_segments (topic_id, partition, (epochs[1]), end_offset)
    WHERE state = 1 AND cardinality(epochs) = 1;
CREATE INDEX rlmm_segments_epoch_ends_idx ON rlmm_segments (topic_id, partition, (epochs[1]), end_offset)
    WHERE finished_version IS NOT NULL AND cardinality(epochs) = 1;
COMMENT ON INDEX rlmm_segments_epoch_list_idx IS 'The segments of one leader epoch (no epoch row) that are not forgotten, by epoch in list order: listings by epoch, RemoteLogSize, FirstSegmentForTimestamp.';
COMMENT ON INDEX rlmm_segments_epoch_highest_idx IS 'The finished segments of one leader epoch by epoch and end offset: HighestOffsetForEpoch.';
COMMENT ON INDEX rlmm_segments_epoch_ends_idx IS 'The segments of one leader epoch that ever finished copying, by epoch and end offset: EpochEndOffset.';
COMMENT ON TABLE rlmm_segments IS 'One row per remote log segment ever added. A segment in DELETE_SEGMENT_FINISHED (or of a partition whose delete finished) is forgotten by every query but keeps its id taken until rlmm_purge deletes it.';
COMMENT ON COLUMN rlmm_segments.topic_id IS 'Kafka topic id.';
COMMENT ON COLUMN rlmm_segments.partition IS 'Kafka partition number.';
COMMENT ON COLUMN rlmm_segments.topic IS 'Human-readable topic name.';
COMMENT ON COLUMN rlmm_segments.start_offset IS 'First offset in the segment.';
COMMENT ON COLUMN rlmm_segments.max_timestamp_ms IS 'Largest record timestamp in the segment (ms since the epoch).';
COMMENT ON COLUMN rlmm_segments.event_timestamp_ms IS 'Event time (ms since the epoch) of the latest state.';
COMMENT ON COLUMN rlmm_segments.segment_size_bytes IS 'Size of the segment in remote storage, in bytes.';
COMMENT ON COLUMN rlmm_segments.txn_index_empty IS 'True when the segment has no transaction index entries.';
COMMENT ON COLUMN rlmm_segments.epoch_start_offsets IS 'First offset of each epoch of the epochs column, strictly increasing.';
COMMENT ON COLUMN rlmm_segments.created_at IS 'When the segment was added.';
COMMENT ON COLUMN rlmm_segments.updated_at IS 'When the segment was last written to.';
COMMENT ON COLUMN rlmm_segments.segment_id IS 'Remote log segment id, unique across partitions.';
COMMENT ON COLUMN rlmm_segments.end_offset IS 'Last offset in the segment (inclusive).';
COMMENT ON COLUMN rlmm_segments.broker_id IS 'Broker that wrote the latest state (-1: an operator, through a repair function).';
COMMENT ON COLUMN rlmm_segments.custom_metadata IS 'Opaque bytes of the remote storage manager; NULL: none.';
COMMENT ON COLUMN rlmm_segments.state IS '0 COPY_SEGMENT_STARTED, 1 COPY_SEGMENT_FINISHED, 2 DELETE_SEGMENT_STARTED, 3 DELETE_SEGMENT_FINISHED.';
COMMENT ON COLUMN rlmm_segments.epochs IS 'Leader epochs in the segment, increasing; epochs[i] starts at epoch_start_offsets[i].';
COMMENT ON COLUMN rlmm_segments.added_version IS 'Partition version of the add: orders segments that start at the same offset.';
COMMENT ON COLUMN rlmm_segments.finished_version IS 'Partition version of the first COPY_SEGMENT_FINISHED; NULL: never finished.';
COMMENT ON COLUMN rlmm_segments.last_version IS 'Partition version of the latest write to the segment: the change feed (segments with last_version > v changed after v).';
COMMENT ON INDEX rlmm_segments_forgotten_idx IS 'The segments in DELETE_SEGMENT_FINISHED by when they got there: what rlmm_purge reads.';

CREATE TABLE rlmm_segment_epochs (
    topic_id             uuid NOT NULL,
    partition            integer NOT NULL,
    segment_id           uuid NOT NULL,
    epoch                rlmm_epoch NOT NULL,
    first_offset         bigint NOT NULL,
    last_offset          bigint NOT NULL,
    state                rlmm_segment_state NOT NULL,
    segment_start_offset bigint NOT NULL,
    segment_end_offset   bigint NOT NULL,
    added_version        bigint NOT NULL,
    finished_version     bigint,
    last_version         bigint NOT NULL,
    segment_size_bytes   integer NOT NULL,
    max_timestamp_ms     bigint NOT NULL,
    PRIMARY KEY (segment_id, epoch),
    CONSTRAINT rlmm_segment_epochs_state_check CHECK (state <> 1 OR finished_version IS NOT NULL),
    CONSTRAINT rlmm_segment_epochs_range_check CHECK (segment_start_offset <= first_offset AND first_offset <= last_offset
        AND last_offset <= segment_end_offset)
);
CREATE INDEX rlmm_segment_epochs_ends_idx ON rlmm_segment_epochs (topic_id, partition, epoch, last_offset)
    WHERE finished_version IS NOT NULL;
COMMENT ON INDEX rlmm_segment_epochs_ends_idx IS 'The ranges of segments that ever finished copying, by epoch and end: EpochEndOffset reads the largest in one descent.';
CREATE INDEX rlmm_segment_epochs_highest_idx ON rlmm_segment_epochs (topic_id, partition, epoch, segment_end_offset) WHERE state = 1;
CREATE INDEX rlmm_segment_epochs_list_idx ON rlmm_segment_epochs (topic_id, partition, epoch, segment_start_offset, added_version)
    WHERE state IN (0, 1, 2);
-- The epoch rows' foreign key: its check reads rlmm_segments_segment_id_key
-- (no other index of rlmm_segments starts with segment_id, so the plan does
-- not depend on statistics), and its cascade the primary key above.
ALTER TABLE rlmm_segment_epochs ADD CONSTRAINT rlmm_segment_epochs_segment_fkey
    FOREIGN KEY (segment_id) REFERENCES rlmm_segments (segment_id) ON DELETE CASCADE;
COMMENT ON TABLE rlmm_segment_epochs IS 'One row per (segment, leader epoch) of each segment that spans several leader epochs (a segment of one epoch has none: rlmm_segments_epoch_*_idx index it), with the epoch''s offsets inside the segment and copies of the segment''s state, offsets, versions, size and max timestamp: what HighestOffsetForEpoch, listings by epoch, RemoteLogSize, EpochEndOffset and FirstSegmentForTimestamp read besides those indexes. Written by the same statements as the segment. rlmm_segment_epochs_v shows the ranges of every segment.';
COMMENT ON COLUMN rlmm_segment_epochs.topic_id IS 'Kafka topic id.';
COMMENT ON COLUMN rlmm_segment_epochs.partition IS 'Kafka partition number.';
COMMENT ON COLUMN rlmm_segment_epochs.segment_id IS 'The segment (rlmm_segments.segment_id).';
COMMENT ON COLUMN rlmm_segment_epochs.epoch IS 'Leader epoch.';
COMMENT ON COLUMN rlmm_segment_epochs.first_offset IS 'First offset of the epoch inside the segment.';
COMMENT ON COLUMN rlmm_segment_epochs.last_offset IS 'Last offset of the epoch inside the segment: the next epoch''s first offset minus 1, or the segment''s end offset.';
COMMENT ON COLUMN rlmm_segment_epochs.state IS 'Copy of the segment''s state, kept in the same statement that changes it.';
COMMENT ON COLUMN rlmm_segment_epochs.segment_start_offset IS 'Copy of the segment''s start offset (list order).';
COMMENT ON COLUMN rlmm_segment_epochs.segment_end_offset IS 'Copy of the segment''s end offset (highest offset for an epoch).';
COMMENT ON COLUMN rlmm_segment_epochs.added_version IS 'Copy of the segment''s added_version (list order).';
COMMENT ON COLUMN rlmm_segment_epochs.finished_version IS 'Partition version of the segment''s first COPY_SEGMENT_FINISHED: among finished ranges that start at the same offset, the latest wins a lookup.';
COMMENT ON COLUMN rlmm_segment_epochs.last_version IS 'Copy of the segment''s last_version, stamped by every write (the state guard tells a raw UPDATE by it staying unchanged).';
COMMENT ON COLUMN rlmm_segment_epochs.segment_size_bytes IS 'Copy of the segment''s segment_size_bytes (RemoteLogSize sums it).';
COMMENT ON COLUMN rlmm_segment_epochs.max_timestamp_ms IS 'Copy of the segment''s max_timestamp_ms (FirstSegmentForTimestamp filters on it).';

CREATE TABLE rlmm_epoch_ends (
    topic_id   uuid NOT NULL,
    partition  integer NOT NULL,
    epoch      rlmm_epoch NOT NULL,
    end_offset rlmm_offset NOT NULL,
    PRIMARY KEY (topic_id, partition, epoch)
);
COMMENT ON TABLE rlmm_epoch_ends IS 'Per partition and leader epoch, the largest end offset of the epoch''s range in a segment that had finished copying and that rlmm_purge_round has since deleted. EpochEndOffset answers the greater of it and the finished epoch rows still stored (rlmm_segment_epochs_ends_idx). Raised only by the purge, never lowered; taken by the purge of the partition''s delete.';
COMMENT ON COLUMN rlmm_epoch_ends.topic_id IS 'Kafka topic id.';
COMMENT ON COLUMN rlmm_epoch_ends.partition IS 'Kafka partition number.';
COMMENT ON COLUMN rlmm_epoch_ends.epoch IS 'Leader epoch.';
COMMENT ON COLUMN rlmm_epoch_ends.end_offset IS 'Largest last_offset of the epoch''s range in a purged segment that had reached COPY_SEGMENT_FINISHED.';

CREATE TABLE rlmm_data_generation (
    id         smallint PRIMARY KEY DEFAULT 1 CONSTRAINT rlmm_data_generation_one_row CHECK (id = 1),
    generation bigint NOT NULL,
    changed_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO rlmm_data_generation (id, generation) VALUES (1, 1);
COMMENT ON TABLE rlmm_data_generation IS 'One row: the generation of the metadata, bumped by rlmm_resync(). A cache loaded at another generation reloads every partition.';
COMMENT ON COLUMN rlmm_data_generation.id IS 'Always 1: the table has one row.';
COMMENT ON COLUMN rlmm_data_generation.generation IS 'Bumped by rlmm_resync().';
COMMENT ON COLUMN rlmm_data_generation.changed_at IS 'When the generation was last bumped.';

-- +goose StatementBegin
CREATE FUNCTION rlmm_state_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- The WHEN clauses let through every write that stamps a new version,
    -- as the library's statements and the repair functions do.
    IF TG_TABLE_NAME = 'rlmm_partitions' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'check_violation', CONSTRAINT = 'rlmm_partitions_raw_state_change', TABLE = TG_TABLE_NAME,
            MESSAGE = format('partition %s-%s (topic id %s): a raw UPDATE of delete_state bypasses the transition check, the version and the brokers'' caches; call rlmm_set_partition_delete_state(%L, %s, <state>)',
                             OLD.topic, OLD.partition, OLD.topic_id, OLD.topic_id, OLD.partition),
            HINT = 'See docs/DBA.md, "Repairs".';
    END IF;
    RAISE EXCEPTION USING
        ERRCODE = 'check_violation', CONSTRAINT = TG_TABLE_NAME || '_raw_state_change', TABLE = TG_TABLE_NAME,
        MESSAGE = format('%s: segment %s: a raw UPDATE of state bypasses the transition check, the epoch rows, the version and the brokers'' caches; call rlmm_set_segment_state(%L, <state>)',
                         TG_TABLE_NAME, OLD.segment_id, OLD.segment_id),
        HINT = 'See docs/DBA.md, "Repairs".';
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION rlmm_state_guard() IS 'Trigger: refuses a change of a segment''s or an epoch row''s state, or of a partition''s delete state, that does not stamp a new version (a raw UPDATE): the repair functions do such changes with their bookkeeping.';
CREATE TRIGGER rlmm_segments_state_guard BEFORE UPDATE OF state ON rlmm_segments
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state AND OLD.last_version IS NOT DISTINCT FROM NEW.last_version)
    EXECUTE FUNCTION rlmm_state_guard();
CREATE TRIGGER rlmm_segment_epochs_state_guard BEFORE UPDATE OF state ON rlmm_segment_epochs
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state AND OLD.last_version IS NOT DISTINCT FROM NEW.last_version)
    EXECUTE FUNCTION rlmm_state_guard();
CREATE TRIGGER rlmm_partitions_delete_state_guard BEFORE UPDATE OF delete_state ON rlmm_partitions
    FOR EACH ROW WHEN (OLD.delete_state IS DISTINCT FROM NEW.delete_state AND OLD.version IS NOT DISTINCT FROM NEW.version)
    EXECUTE FUNCTION rlmm_state_guard();

-- +goose StatementBegin
CREATE FUNCTION rlmm_identity_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'foreign_key_violation', CONSTRAINT = TG_TABLE_NAME || '_identity', TABLE = TG_TABLE_NAME,
        MESSAGE = format('%s: segment %s (topic id %s, partition %s) cannot become segment %s (topic id %s, partition %s): the identity of a segment and of its epoch rows never changes; add the segment under its new identity instead',
                         TG_TABLE_NAME, OLD.segment_id, OLD.topic_id, OLD.partition, NEW.segment_id, NEW.topic_id, NEW.partition);
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION rlmm_identity_guard() IS 'Trigger: refuses a change of a segment''s or an epoch row''s topic id, partition or segment id.';
CREATE TRIGGER rlmm_segments_identity BEFORE UPDATE OF topic_id, partition, segment_id ON rlmm_segments
    FOR EACH ROW WHEN (OLD.topic_id IS DISTINCT FROM NEW.topic_id OR OLD.partition IS DISTINCT FROM NEW.partition
                       OR OLD.segment_id IS DISTINCT FROM NEW.segment_id)
    EXECUTE FUNCTION rlmm_identity_guard();
CREATE TRIGGER rlmm_segment_epochs_identity BEFORE UPDATE OF topic_id, partition, segment_id ON rlmm_segment_epochs
    FOR EACH ROW WHEN (OLD.topic_id IS DISTINCT FROM NEW.topic_id OR OLD.partition IS DISTINCT FROM NEW.partition
                       OR OLD.segment_id IS DISTINCT FROM NEW.segment_id)
    EXECUTE FUNCTION rlmm_identity_guard();
CREATE VIEW rlmm_segments_v AS
SELECT p.topic,
       s.partition,
       s.segment_id,
       st.name AS state,
       (s.state = 3 OR p.delete_state IS NOT DISTINCT FROM 2) AS forgotten,
       s.start_offset,
       s.end_offset,
       (CASE WHEN s.end_offset - s.start_offset < 9223372036854775807
             THEN s.end_offset - s.start_offset + 1 END)::bigint AS offset_count,
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

CREATE VIEW rlmm_segment_epochs_v AS
SELECT p.topic,
       e.partition,
       e.epoch,
       e.first_offset,
       e.last_offset,
       (CASE WHEN e.last_offset - e.first_offset < 9223372036854775807
             THEN e.last_offset - e.first_offset + 1 END)::bigint AS offset_count,
       e.segment_id,
       st.name AS state,
       (e.state = 1 AND p.delete_state IS DISTINCT FROM 2) AS answers_lookups,
       e.segment_start_offset,
       e.segment_end_offset,
       e.finished_version,
       e.topic_id
FROM (SELECT s.topic_id, s.partition, s.segment_id, s.epochs[k] AS epoch, s.epoch_start_offsets[k] AS first_offset,
             coalesce(s.epoch_start_offsets[k + 1] - 1, s.end_offset) AS last_offset, s.state,
             s.start_offset AS segment_start_offset, s.end_offset AS segment_end_offset, s.finished_version
      FROM rlmm_segments s, generate_subscripts(s.epochs, 1) AS k) AS e
JOIN rlmm_partitions p ON p.topic_id = e.topic_id AND p.partition = e.partition
JOIN rlmm_segment_states st ON st.state = e.state;
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

CREATE VIEW rlmm_stuck_v AS
SELECT 'segment'::text AS kind,
       s.topic,
       s.partition,
       s.segment_id,
       st.name AS state,
       s.broker_id,
       s.updated_at AS since,
       (now() - s.updated_at)::interval AS age,
       to_timestamp(s.event_timestamp_ms / 1000.0)::timestamptz AS event_time,
       s.start_offset,
       s.end_offset,
       s.segment_size_bytes::bigint AS size_bytes,
       s.topic_id,
       s.state AS state_code
FROM rlmm_segments s
JOIN rlmm_partitions p ON p.topic_id = s.topic_id AND p.partition = s.partition
JOIN rlmm_segment_states st ON st.state = s.state
WHERE s.state IN (0, 2) AND p.delete_state IS DISTINCT FROM 2
UNION ALL
SELECT 'partition'::text,
       p.topic,
       p.partition,
       NULL::uuid,
       pds.name,
       p.delete_broker_id,
       p.updated_at,
       (now() - p.updated_at)::interval,
       to_timestamp(p.delete_event_timestamp_ms / 1000.0)::timestamptz,
       NULL::bigint,
       NULL::bigint,
       NULL::bigint,
       p.topic_id,
       p.delete_state
FROM rlmm_partitions p
JOIN rlmm_partition_delete_states pds ON pds.state = p.delete_state
WHERE p.delete_state IN (0, 1);

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
COMMENT ON VIEW rlmm_segment_epochs_v IS 'One row per (segment, leader epoch), from the segment''s own arrays: the offsets of that epoch inside the segment, which is what offset lookups match against.';
COMMENT ON COLUMN rlmm_segment_epochs_v.topic IS 'Topic name.';
COMMENT ON COLUMN rlmm_segment_epochs_v.partition IS 'Partition number.';
COMMENT ON COLUMN rlmm_segment_epochs_v.epoch IS 'Leader epoch.';
COMMENT ON COLUMN rlmm_segment_epochs_v.first_offset IS 'First offset of the epoch inside the segment.';
COMMENT ON COLUMN rlmm_segment_epochs_v.last_offset IS 'Last offset of the epoch inside the segment (inclusive).';
COMMENT ON COLUMN rlmm_segment_epochs_v.offset_count IS 'Number of offsets of the epoch inside the segment; NULL for a range of every offset 0 to 9223372036854775807, whose count (2^63) a bigint cannot hold.';
COMMENT ON COLUMN rlmm_segment_epochs_v.segment_id IS 'The segment (rlmm_segments_v.segment_id).';
COMMENT ON COLUMN rlmm_segment_epochs_v.state IS 'State name of the segment.';
COMMENT ON COLUMN rlmm_segment_epochs_v.answers_lookups IS 'True when lookups of this epoch may return the segment: COPY_SEGMENT_FINISHED, and its partition''s delete has not finished.';
COMMENT ON COLUMN rlmm_segment_epochs_v.segment_start_offset IS 'First offset of the whole segment.';
COMMENT ON COLUMN rlmm_segment_epochs_v.segment_end_offset IS 'Last offset of the whole segment (what HighestOffsetForEpoch returns).';
COMMENT ON COLUMN rlmm_segment_epochs_v.finished_version IS 'Partition version of the segment''s first COPY_SEGMENT_FINISHED: among overlapping ranges that start at the same offset, the latest wins a lookup.';
COMMENT ON COLUMN rlmm_segment_epochs_v.topic_id IS 'Topic id (UUID).';
COMMENT ON VIEW rlmm_segments_v IS 'One row per segment ever added (forgotten ones too), readable: state names, sizes, epochs as text, times as timestamps.';
COMMENT ON COLUMN rlmm_segments_v.topic IS 'Topic name.';
COMMENT ON COLUMN rlmm_segments_v.partition IS 'Partition number.';
COMMENT ON COLUMN rlmm_segments_v.segment_id IS 'Segment id (rlmm_segments.segment_id).';
COMMENT ON COLUMN rlmm_segments_v.state IS 'Segment state name: COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED (the only one lookups see), DELETE_SEGMENT_STARTED, DELETE_SEGMENT_FINISHED.';
COMMENT ON COLUMN rlmm_segments_v.forgotten IS 'True when no query of the library returns the segment any more: DELETE_SEGMENT_FINISHED, or its partition''s delete finished. The row stays so the id stays taken (rlmmctl purge reclaims it).';
COMMENT ON COLUMN rlmm_segments_v.start_offset IS 'First offset in the segment.';
COMMENT ON COLUMN rlmm_segments_v.end_offset IS 'Last offset in the segment (inclusive).';
COMMENT ON COLUMN rlmm_segments_v.offset_count IS 'Number of offsets the segment spans: end_offset - start_offset + 1; NULL for a segment of every offset 0 to 9223372036854775807, whose count (2^63) a bigint cannot hold.';
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
COMMENT ON VIEW rlmm_stuck_v IS 'Work in flight, for finding what a crashed or stuck broker left behind: segments in COPY_SEGMENT_STARTED or DELETE_SEGMENT_STARTED (not forgotten) and partitions in DELETE_PARTITION_MARKED or DELETE_PARTITION_STARTED. The threshold is the caller''s: WHERE age > interval ''1 hour''. Age is on the database clock (updated_at, reset by every write, manual repairs included), event_time is the broker''s clock. rlmmctl stuck and the rlmm_stuck_* gauges read it.';
COMMENT ON COLUMN rlmm_stuck_v.kind IS 'segment or partition.';
COMMENT ON COLUMN rlmm_stuck_v.topic IS 'Topic name.';
COMMENT ON COLUMN rlmm_stuck_v.partition IS 'Partition number.';
COMMENT ON COLUMN rlmm_stuck_v.segment_id IS 'The segment (rlmm_segments_v.segment_id); NULL for a partition.';
COMMENT ON COLUMN rlmm_stuck_v.state IS 'State name: COPY_SEGMENT_STARTED or DELETE_SEGMENT_STARTED for a segment, DELETE_PARTITION_MARKED or DELETE_PARTITION_STARTED for a partition.';
COMMENT ON COLUMN rlmm_stuck_v.broker_id IS 'Broker that wrote the latest state: the one that crashed or got stuck.';
COMMENT ON COLUMN rlmm_stuck_v.since IS 'Database time of the last write to the row (updated_at; for a partition, a delete record or any write to its segments): when the work last made progress.';
COMMENT ON COLUMN rlmm_stuck_v.age IS 'now() - since, on the database clock: how long the work has made no progress. Filter on it for the threshold.';
COMMENT ON COLUMN rlmm_stuck_v.event_time IS 'Event time of the latest state on the broker''s clock (event_timestamp_ms, delete_event_timestamp_ms); compare with since to spot a skewed broker clock.';
COMMENT ON COLUMN rlmm_stuck_v.start_offset IS 'First offset of the segment; NULL for a partition.';
COMMENT ON COLUMN rlmm_stuck_v.end_offset IS 'Last offset of the segment (inclusive); NULL for a partition.';
COMMENT ON COLUMN rlmm_stuck_v.size_bytes IS 'Segment size in remote storage, in bytes: what may leak; NULL for a partition.';
COMMENT ON COLUMN rlmm_stuck_v.topic_id IS 'Topic id (UUID).';
COMMENT ON COLUMN rlmm_stuck_v.state_code IS 'State code, as stored (rlmm_segment_states or rlmm_partition_delete_states, by kind).';
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
    -- last_version stamped here, as the library stamps it: the state guard
    -- lets the write through.
    UPDATE rlmm_segments s
    SET state = target,
        broker_id = rlmm_set_segment_state.broker_id,
        event_timestamp_ms = coalesce(rlmm_set_segment_state.event_timestamp_ms, (extract(epoch FROM clock_timestamp()) * 1000)::bigint),
        finished_version = CASE WHEN target = 1 THEN coalesce(s.finished_version, new_version) ELSE s.finished_version END,
        last_version = new_version,
        updated_at = now()
    WHERE s.segment_id = seg.segment_id;
    UPDATE rlmm_segment_epochs e
    SET state = target,
        finished_version = CASE WHEN target = 1 THEN coalesce(seg.finished_version, new_version) ELSE seg.finished_version END,
        last_version = new_version
    WHERE e.topic_id = seg.topic_id AND e.partition = seg.partition AND e.segment_id = seg.segment_id;
    PERFORM pg_notify('rlmm_changes', seg.topic_id::text || '/' || seg.partition || '/' || new_version);
    RETURN new_version;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION rlmm_set_segment_state(uuid, text, integer, bigint) IS 'Repair: moves a segment to a state (COPY_SEGMENT_FINISHED, or copy_finished, say) when rlmm_segment_transitions allows it, with the library''s bookkeeping (partition version, epoch rows, notification), recording broker_id (default -1, an operator) and event_timestamp_ms (default now). Returns the partition''s version after the change; the current state again changes nothing. SQLSTATE 23514 for a forbidden transition, P0002 for an unknown or forgotten segment, 22023 for an unknown state.';

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
    -- The version bumped in the same UPDATE, as the library bumps it: the
    -- delete state guard lets the write through.
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
        RETURNING s.topic_id, s.partition, s.segment_id, s.last_version, s.finished_version, s.epochs,
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
        UPDATE rlmm_partitions p
        SET vanished_version = greatest(p.vanished_version, d.last_version)
        FROM (SELECT d.topic_id, d.partition, max(d.last_version) AS last_version FROM deleted d GROUP BY d.topic_id, d.partition) d
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
        RETURNING s.topic_id, s.partition, s.last_version
    ), marked AS (
        UPDATE rlmm_partitions p
        SET vanished_version = greatest(p.vanished_version, d.last_version)
        FROM (SELECT d.topic_id, d.partition, max(d.last_version) AS last_version FROM deleted d GROUP BY d.topic_id, d.partition) d
        WHERE p.topic_id = d.topic_id AND p.partition = d.partition
    )
    SELECT count(*) INTO of_deleted FROM deleted;
    segments := segments + of_deleted;

    -- The delete record of partitions whose delete finished and that have
    -- no segment left. The row stays, so that its version keeps growing
    -- (CaughtUp and the caches compare it); the write bumps it, marks it
    -- vanished at the new version (a cache older than that reloads the
    -- partition), and deletes the partition's epoch ends, which its delete
    -- had hidden.
    WITH cleared AS (
        UPDATE rlmm_partitions p
        SET version = p.version + 1,
            vanished_version = p.version + 1,
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
COMMENT ON FUNCTION rlmm_purge_round(interval, integer) IS 'One bounded round of purging (rlmm_purge, purge.go): deletes up to batch_size segments forgotten for older_than, up to batch_size segments of partitions deleted that long ago, and takes the delete record of up to batch_size such partitions with no segment left (each notified). Returns the segments deleted and the partitions whose record it took, with their new versions. Takes every lock with SKIP LOCKED.';

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
        INSERT INTO rlmm_partitions (topic_id, partition, topic, version, max_segment_span, delete_state,
                                     delete_broker_id, delete_event_timestamp_ms, created_at, updated_at, vanished_version)
        SELECT p.topic_id, p.partition, p.topic, p.version,
               greatest((SELECT max(s.end_offset - s.start_offset) FROM %1$I.rlmm_segments s
                         WHERE s.topic_id = p.topic_id AND s.partition = p.partition),
                        (SELECT max(ee.max_segment_span) FROM %1$I.rlmm_epoch_ends ee
                         WHERE ee.topic_id = p.topic_id AND ee.partition = p.partition), 0),
               p.delete_state, p.delete_broker_id, p.delete_event_timestamp_ms, p.created_at, p.updated_at, p.vanished_version
        FROM %1$I.rlmm_partitions p;
        INSERT INTO rlmm_segments (topic_id, partition, segment_id, topic, start_offset, end_offset, max_timestamp_ms, broker_id,
                                   event_timestamp_ms, segment_size_bytes, custom_metadata, state, txn_index_empty, epochs,
                                   epoch_start_offsets, added_version, finished_version, last_version, created_at, updated_at)
        SELECT topic_id, partition, segment_id, topic, start_offset, end_offset, max_timestamp_ms, broker_id,
               event_timestamp_ms, segment_size_bytes, custom_metadata, state, txn_index_empty, epochs,
               epoch_start_offsets, added_version, finished_version, last_version, created_at, updated_at
        FROM %1$I.rlmm_segments;
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

-- +goose Down
-- Back to an empty schema (the data goes with it): the pre-release chain
-- cannot be restored.
DROP VIEW rlmm_segments_v, rlmm_segment_epochs_v, rlmm_partitions_v, rlmm_stuck_v;
DROP TABLE rlmm_epoch_ends, rlmm_segment_epochs, rlmm_segments, rlmm_partitions, rlmm_data_generation,
    rlmm_segment_states, rlmm_segment_transitions, rlmm_partition_delete_states, rlmm_partition_delete_transitions;
DROP DOMAIN rlmm_partition_number, rlmm_topic_name, rlmm_count, rlmm_offset, rlmm_epoch, rlmm_size,
    rlmm_segment_state, rlmm_delete_state;
DROP FUNCTION rlmm_purge(interval, integer), rlmm_purge_round(interval, integer), rlmm_resync(),
    rlmm_set_partition_delete_state(uuid, integer, text, integer, bigint), rlmm_set_segment_state(uuid, text, integer, bigint),
    rlmm_state_guard(), rlmm_identity_guard();
