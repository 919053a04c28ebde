-- Release 1's baseline, part 2 of 4 (1_tables.sql says how the parts make
-- the migration): the triggers left, which only refuse raw DML that would
-- break what the library relies on, and the views for people.

-- +goose StatementBegin
CREATE FUNCTION rlmm_state_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- The WHEN clauses let through every write that stamps a new version
    -- (last_version, delete_version),
    -- as the library's statements and the repair functions do.
    IF TG_TABLE_NAME = 'rlmm_partitions' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'check_violation', CONSTRAINT = 'rlmm_partitions_raw_state_change', TABLE = TG_TABLE_NAME,
            MESSAGE = format('partition %s-%s (topic id %s): a raw UPDATE of delete_state bypasses the transition check, the write order and the brokers'' caches; call rlmm_set_partition_delete_state(%L, %s, <state>)',
                             OLD.topic, OLD.partition, OLD.topic_id, OLD.topic_id, OLD.partition),
            HINT = 'See docs/DBA.md, "Repairs".';
    END IF;
    RAISE EXCEPTION USING
        ERRCODE = 'check_violation', CONSTRAINT = TG_TABLE_NAME || '_raw_state_change', TABLE = TG_TABLE_NAME,
        MESSAGE = format('%s: segment %s: a raw UPDATE of state bypasses the transition check, the epoch rows, the change feed and the brokers'' caches; call rlmm_set_segment_state(%L, <state>)',
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
    FOR EACH ROW WHEN (OLD.delete_state IS DISTINCT FROM NEW.delete_state AND OLD.delete_version IS NOT DISTINCT FROM NEW.delete_version)
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

COMMENT ON VIEW rlmm_partitions_v IS 'One row per partition: its segments per state, the bytes it holds in remote storage, its delete state and last change.';
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
