-- Release 1's baseline: the whole schema of release 1, in the first schema
-- of the search path, as one goose migration. Its source is the four parts
-- of this directory, which "make generate" joins, in name order, into
-- migrations/00019_release_1.sql, the file goose runs (in one transaction).
-- Release 1 shipped: neither changes, a later schema is a migration of its
-- own (docs/MIGRATIONS.md, "Releases"). The parts:
--   1_tables.sql           the pre-release set-aside, the state machine's
--                          tables, the domains and the data tables;
--   2_guards_and_views.sql the triggers that refuse raw DML, and the views;
--   3_repair_functions.sql the repair and purge functions;
--   4_pre_release_rows.sql the pre-release rows copied in, and Down.
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
--   - the change feed is by transaction id: every write stamps the rows it
--     writes with its own (last_xid), and a cache remembers the snapshot
--     it last read in; the rows changed since are those whose last_xid
--     that snapshot does not see. No write bumps a counter of the
--     partition: a write only locks the partition row (FOR NO KEY UPDATE;
--     a delete record's writer FOR UPDATE), and takes its write order from
--     the sequence rlmm_versions under that lock, so that write orders
--     follow commits within a partition (the list key, the lookups'
--     "finished last", a segment's newest write);
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
COMMENT ON DOMAIN rlmm_count IS 'A write order or a span of offsets: 0 or more.';
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

CREATE SEQUENCE rlmm_versions AS bigint;
COMMENT ON SEQUENCE rlmm_versions IS 'The write order: each add, each first COPY_SEGMENT_FINISHED and each change of a delete record takes a number.';

CREATE TABLE rlmm_partitions (
    topic_id                  uuid NOT NULL,
    partition                 rlmm_partition_number NOT NULL,
    topic                     rlmm_topic_name NOT NULL,
    max_segment_span          rlmm_count NOT NULL DEFAULT 0,
    delete_state              rlmm_delete_state,
    delete_broker_id          integer,
    delete_event_timestamp_ms bigint,
    created_at                timestamptz NOT NULL DEFAULT now(),
    updated_at                timestamptz NOT NULL DEFAULT now(),
    delete_version            rlmm_count NOT NULL DEFAULT 0,
    vanished_xid              xid8,
    PRIMARY KEY (topic_id, partition),
    CONSTRAINT rlmm_partitions_delete_fields_check CHECK ((delete_state IS NULL) = (delete_broker_id IS NULL)
        AND (delete_state IS NULL) = (delete_event_timestamp_ms IS NULL))
) WITH (fillfactor = 50);
CREATE INDEX rlmm_partitions_topic_idx ON rlmm_partitions (topic, partition);
CREATE INDEX rlmm_partitions_deleting_idx ON rlmm_partitions (delete_state) WHERE delete_state IN (0, 1);
CREATE INDEX rlmm_partitions_deleted_idx ON rlmm_partitions (topic_id, partition) WHERE delete_state = 2;
COMMENT ON INDEX rlmm_partitions_deleted_idx IS 'The partitions in DELETE_PARTITION_FINISHED: what rlmm_purge reads.';
COMMENT ON TABLE rlmm_partitions IS 'One row per topic partition that has ever had a segment or a partition-delete record: its delete state. Every write to the partition locks this row first (FOR NO KEY UPDATE; a change of the delete record FOR UPDATE), and no write but a change of its delete record or of max_segment_span changes it.';
COMMENT ON COLUMN rlmm_partitions.topic_id IS 'Kafka topic id (with partition, the identity of the partition).';
COMMENT ON COLUMN rlmm_partitions.partition IS 'Kafka partition number.';
COMMENT ON COLUMN rlmm_partitions.created_at IS 'When the row was created.';
COMMENT ON COLUMN rlmm_partitions.updated_at IS 'When the row last changed: its delete record, or its max_segment_span.';
COMMENT ON COLUMN rlmm_partitions.topic IS 'Topic name, as the first write named it.';
COMMENT ON COLUMN rlmm_partitions.max_segment_span IS 'Largest end_offset - start_offset of any segment ever added: a lookup walks back from an offset to offset - max_segment_span, FirstSegmentForTimestamp from startingOffset - max_segment_span.';
COMMENT ON COLUMN rlmm_partitions.delete_state IS 'NULL none, 0 DELETE_PARTITION_MARKED, 1 DELETE_PARTITION_STARTED, 2 DELETE_PARTITION_FINISHED (every segment forgotten).';
COMMENT ON COLUMN rlmm_partitions.delete_broker_id IS 'Broker that wrote the latest partition-delete record.';
COMMENT ON COLUMN rlmm_partitions.delete_event_timestamp_ms IS 'Event time (ms since the epoch) of the latest partition-delete record.';
COMMENT ON COLUMN rlmm_partitions.delete_version IS 'Write order (rlmm_versions) of the latest change of the delete record: a cache keeps the newest it has seen. 0: never changed.';
COMMENT ON COLUMN rlmm_partitions.vanished_xid IS 'Largest transaction id among the last writes of the segment rows rlmm_purge deleted (its own, when it took the delete record): a cache whose snapshot may not see it cannot catch up by the change feed and reloads the partition. NULL: none.';

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
    last_xid            xid8 NOT NULL,
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
CREATE INDEX rlmm_segments_changes_idx ON rlmm_segments (topic_id, partition, last_xid);
COMMENT ON INDEX rlmm_segments_changes_idx IS 'The change feed: the segments of a partition by the transaction that last wrote them.';
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
COMMENT ON COLUMN rlmm_segments.added_version IS 'Write order (rlmm_versions) of the add: orders segments that start at the same offset.';
COMMENT ON COLUMN rlmm_segments.finished_version IS 'Write order (rlmm_versions) of the first COPY_SEGMENT_FINISHED; NULL: never finished.';
COMMENT ON COLUMN rlmm_segments.last_version IS 'Order of the latest write to the segment, greater than every earlier write''s: a cache keeps the newest write of a segment it has seen.';
COMMENT ON COLUMN rlmm_segments.last_xid IS 'Transaction id of the latest write to the segment: the change feed (the rows a snapshot does not see changed after it).';
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
COMMENT ON COLUMN rlmm_segment_epochs.finished_version IS 'Write order (rlmm_versions) of the segment''s first COPY_SEGMENT_FINISHED: among finished ranges that start at the same offset, the latest wins a lookup.';
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
