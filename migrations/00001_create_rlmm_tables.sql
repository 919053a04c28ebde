-- +goose Up
-- The remote log metadata of Kafka tiered storage (KIP-405).
-- State codes (see statemachine.go, the single source of truth for transitions):
--   segment state:          0 COPY_SEGMENT_STARTED, 1 COPY_SEGMENT_FINISHED,
--                           2 DELETE_SEGMENT_STARTED, 3 DELETE_SEGMENT_FINISHED
--   partition delete state: NULL none, 0 DELETE_PARTITION_MARKED,
--                           1 DELETE_PARTITION_STARTED, 2 DELETE_PARTITION_FINISHED
-- Every key and index leads with (topic_id, partition) so the tables can be
-- distributed by topic_id; the one exception is the global uniqueness of a
-- segment id (rlmm_segments_segment_id_key).

CREATE TABLE rlmm_partitions (
    topic_id                   uuid        NOT NULL,
    partition                  integer     NOT NULL,
    topic                      text        NOT NULL,
    version                    bigint      NOT NULL DEFAULT 0,
    max_epoch_span             bigint      NOT NULL DEFAULT 0,
    delete_state               smallint,
    delete_broker_id           integer,
    delete_event_timestamp_ms  bigint,
    created_at                 timestamptz NOT NULL DEFAULT now(),
    updated_at                 timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT rlmm_partitions_pkey PRIMARY KEY (topic_id, partition),
    CONSTRAINT rlmm_partitions_partition_check CHECK (partition >= 0),
    CONSTRAINT rlmm_partitions_topic_check CHECK (topic ~ '^[a-zA-Z0-9._-]{1,249}$' AND topic NOT IN ('.', '..')),
    CONSTRAINT rlmm_partitions_version_check CHECK (version >= 0),
    CONSTRAINT rlmm_partitions_max_epoch_span_check CHECK (max_epoch_span >= 0),
    CONSTRAINT rlmm_partitions_delete_state_check CHECK (delete_state IN (0, 1, 2)),
    CONSTRAINT rlmm_partitions_delete_fields_check CHECK (
        (delete_state IS NULL) = (delete_broker_id IS NULL)
        AND (delete_state IS NULL) = (delete_event_timestamp_ms IS NULL))
);

COMMENT ON TABLE rlmm_partitions IS 'One row per topic partition that has ever had a segment or a partition-delete record: its delete state and its committed version.';
COMMENT ON COLUMN rlmm_partitions.topic_id IS 'Kafka topic id (with partition, the identity of the partition).';
COMMENT ON COLUMN rlmm_partitions.partition IS 'Kafka partition number.';
COMMENT ON COLUMN rlmm_partitions.topic IS 'Human-readable topic name, as the first write named it.';
COMMENT ON COLUMN rlmm_partitions.version IS 'Committed position of the partition: bumped by every write to it (add, update, partition delete). CaughtUp compares it.';
COMMENT ON COLUMN rlmm_partitions.max_epoch_span IS 'Largest last_offset - first_offset of any epoch range ever added to the partition: bounds how far back from an offset the lookup scans.';
COMMENT ON COLUMN rlmm_partitions.delete_state IS 'Partition delete state: NULL none, 0 DELETE_PARTITION_MARKED, 1 DELETE_PARTITION_STARTED, 2 DELETE_PARTITION_FINISHED (every segment forgotten).';
COMMENT ON COLUMN rlmm_partitions.delete_broker_id IS 'Broker that wrote the latest partition-delete record.';
COMMENT ON COLUMN rlmm_partitions.delete_event_timestamp_ms IS 'Event time (ms since the epoch) of the latest partition-delete record.';
COMMENT ON COLUMN rlmm_partitions.created_at IS 'When the row was created.';
COMMENT ON COLUMN rlmm_partitions.updated_at IS 'When the partition was last written to.';

CREATE TABLE rlmm_segments (
    topic_id             uuid        NOT NULL,
    partition            integer     NOT NULL,
    segment_id           uuid        NOT NULL,
    topic                text        NOT NULL,
    start_offset         bigint      NOT NULL,
    end_offset           bigint      NOT NULL,
    max_timestamp_ms     bigint      NOT NULL,
    broker_id            integer     NOT NULL,
    event_timestamp_ms   bigint      NOT NULL,
    segment_size_bytes   integer     NOT NULL,
    custom_metadata      bytea,
    state                smallint    NOT NULL,
    txn_index_empty      boolean     NOT NULL,
    epochs               integer[]   NOT NULL,
    epoch_start_offsets  bigint[]    NOT NULL,
    added_version        bigint      NOT NULL,
    finished_version     bigint,
    last_version         bigint      NOT NULL,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT rlmm_segments_pkey PRIMARY KEY (topic_id, partition, segment_id),
    CONSTRAINT rlmm_segments_partition_fkey FOREIGN KEY (topic_id, partition) REFERENCES rlmm_partitions (topic_id, partition),
    CONSTRAINT rlmm_segments_state_check CHECK (state IN (0, 1, 2, 3)),
    CONSTRAINT rlmm_segments_offsets_check CHECK (0 <= start_offset AND start_offset <= end_offset),
    CONSTRAINT rlmm_segments_size_check CHECK (segment_size_bytes >= 0),
    CONSTRAINT rlmm_segments_versions_check CHECK (
        added_version <= last_version
        AND (finished_version IS NULL OR (added_version < finished_version AND finished_version <= last_version))
        AND (state <> 1 OR finished_version IS NOT NULL)),
    CONSTRAINT rlmm_segments_epochs_check CHECK (
        cardinality(epochs) >= 1
        AND cardinality(epochs) = cardinality(epoch_start_offsets)
        AND epoch_start_offsets[1] >= start_offset
        AND epoch_start_offsets[cardinality(epoch_start_offsets)] <= end_offset)
);

CREATE UNIQUE INDEX rlmm_segments_segment_id_key ON rlmm_segments (segment_id);
CREATE INDEX rlmm_segments_list_idx ON rlmm_segments (topic_id, partition, start_offset, added_version)
    WHERE state IN (0, 1, 2);
-- The change feed of a partition: the segments written after a version, for
-- caches catching up (see PgManager's WithCache).
CREATE INDEX rlmm_segments_changes_idx ON rlmm_segments (topic_id, partition, last_version);

COMMENT ON TABLE rlmm_segments IS 'One row per remote log segment ever added. A segment in DELETE_SEGMENT_FINISHED (or of a partition whose delete finished) is forgotten by every query but keeps its id taken.';
COMMENT ON COLUMN rlmm_segments.topic_id IS 'Kafka topic id.';
COMMENT ON COLUMN rlmm_segments.partition IS 'Kafka partition number.';
COMMENT ON COLUMN rlmm_segments.segment_id IS 'Remote log segment id, globally unique.';
COMMENT ON COLUMN rlmm_segments.topic IS 'Human-readable topic name.';
COMMENT ON COLUMN rlmm_segments.start_offset IS 'First offset in the segment.';
COMMENT ON COLUMN rlmm_segments.end_offset IS 'Last offset in the segment (inclusive).';
COMMENT ON COLUMN rlmm_segments.max_timestamp_ms IS 'Largest record timestamp in the segment (ms since the epoch).';
COMMENT ON COLUMN rlmm_segments.broker_id IS 'Broker that wrote the latest state.';
COMMENT ON COLUMN rlmm_segments.event_timestamp_ms IS 'Event time (ms since the epoch) of the latest state.';
COMMENT ON COLUMN rlmm_segments.segment_size_bytes IS 'Size of the segment in remote storage, in bytes.';
COMMENT ON COLUMN rlmm_segments.custom_metadata IS 'Opaque bytes of the remote storage manager; NULL: none.';
COMMENT ON COLUMN rlmm_segments.state IS 'Segment state: 0 COPY_SEGMENT_STARTED, 1 COPY_SEGMENT_FINISHED, 2 DELETE_SEGMENT_STARTED, 3 DELETE_SEGMENT_FINISHED.';
COMMENT ON COLUMN rlmm_segments.txn_index_empty IS 'True when the segment has no transaction index entries.';
COMMENT ON COLUMN rlmm_segments.epochs IS 'Leader epochs in the segment, increasing; epochs[i] starts at epoch_start_offsets[i].';
COMMENT ON COLUMN rlmm_segments.epoch_start_offsets IS 'First offset of each epoch of the epochs column, strictly increasing.';
COMMENT ON COLUMN rlmm_segments.added_version IS 'Partition version of the add: orders segments that start at the same offset.';
COMMENT ON COLUMN rlmm_segments.finished_version IS 'Partition version of the segment''s first COPY_SEGMENT_FINISHED; NULL: never finished.';
COMMENT ON COLUMN rlmm_segments.last_version IS 'Partition version of the latest write to the segment: the partition''s change feed (segments with last_version > v changed after v).';
COMMENT ON COLUMN rlmm_segments.created_at IS 'When the segment was added.';
COMMENT ON COLUMN rlmm_segments.updated_at IS 'When the segment was last written to.';

CREATE TABLE rlmm_segment_epochs (
    topic_id              uuid     NOT NULL,
    partition             integer  NOT NULL,
    segment_id            uuid     NOT NULL,
    epoch                 integer  NOT NULL,
    first_offset          bigint   NOT NULL,
    last_offset           bigint   NOT NULL,
    state                 smallint NOT NULL,
    segment_start_offset  bigint   NOT NULL,
    segment_end_offset    bigint   NOT NULL,
    added_version         bigint   NOT NULL,
    finished_version      bigint,
    last_version          bigint   NOT NULL DEFAULT 0,
    CONSTRAINT rlmm_segment_epochs_pkey PRIMARY KEY (topic_id, partition, segment_id, epoch),
    CONSTRAINT rlmm_segment_epochs_segment_fkey FOREIGN KEY (topic_id, partition, segment_id)
        REFERENCES rlmm_segments (topic_id, partition, segment_id) ON DELETE CASCADE,
    CONSTRAINT rlmm_segment_epochs_epoch_check CHECK (epoch >= 0),
    CONSTRAINT rlmm_segment_epochs_state_check CHECK (state IN (0, 1, 2, 3)),
    CONSTRAINT rlmm_segment_epochs_range_check CHECK (
        segment_start_offset <= first_offset AND first_offset <= last_offset AND last_offset <= segment_end_offset),
    CONSTRAINT rlmm_segment_epochs_finished_check CHECK (state <> 1 OR finished_version IS NOT NULL)
);

-- The offset lookup: the finished ranges of (partition, epoch) whose first
-- offset lies in [offset - max_epoch_span, offset], latest first. The window
-- bounds the scan, so a miss costs what a hit costs.
CREATE INDEX rlmm_segment_epochs_lookup_idx ON rlmm_segment_epochs
    (topic_id, partition, epoch, first_offset, finished_version) INCLUDE (last_offset, segment_id)
    WHERE state = 1;
-- HighestOffsetForEpoch: the largest end offset of a finished segment carrying the epoch.
CREATE INDEX rlmm_segment_epochs_highest_idx ON rlmm_segment_epochs (topic_id, partition, epoch, segment_end_offset)
    WHERE state = 1;
-- ListRemoteLogSegmentsByEpoch: the segments carrying the epoch, not forgotten, in list order.
CREATE INDEX rlmm_segment_epochs_list_idx ON rlmm_segment_epochs (topic_id, partition, epoch, segment_start_offset, added_version)
    WHERE state IN (0, 1, 2);

COMMENT ON TABLE rlmm_segment_epochs IS 'One row per (segment, leader epoch): the range of offsets of that epoch inside the segment, precomputed, with copies of the segment fields the queries filter and sort on.';
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
COMMENT ON COLUMN rlmm_segment_epochs.last_version IS 'Copy of the segment''s last_version, set by the library''s writes (the guard triggers tell a manual UPDATE by it staying unchanged).';
COMMENT ON COLUMN rlmm_segment_epochs.finished_version IS 'Partition version of the segment''s first COPY_SEGMENT_FINISHED: among finished ranges that start at the same offset, the latest wins a lookup.';

-- +goose Down
DROP TABLE rlmm_segment_epochs;
DROP TABLE rlmm_segments;
DROP TABLE rlmm_partitions;
