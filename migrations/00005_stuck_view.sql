-- +goose Up
-- rlmm:compatible-with 2
-- Stuck work: what a crashed or stuck broker left behind (an upload
-- abandoned in COPY_SEGMENT_STARTED leaks its objects in remote storage,
-- compare KAFKA-16511). Expand-only: one view and two partial indexes.
--
-- The age is measured on the database's clock (updated_at, stamped with
-- now() by every write of the library and by the guard triggers of 00002 on
-- a manual state change), not on the brokers' event timestamps, which a
-- skewed broker clock would distort; the broker's event time is shown too.

-- Only the in-flight rows are in these indexes: a query over the view reads
-- O(stuck rows), not O(segments), however many finished segments there are.
-- Measured (EXPLAIN (ANALYZE, BUFFERS), 100,000 finished segments, 3 stuck):
-- 4 index buffers, 0.16 ms with the index; a seq scan of 2,703 buffers,
-- 116 ms without.
CREATE INDEX rlmm_segments_in_flight_idx ON rlmm_segments (updated_at)
    WHERE state IN (0, 2);
CREATE INDEX rlmm_partitions_deleting_idx ON rlmm_partitions (updated_at)
    WHERE delete_state IN (0, 1);

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

-- +goose Down
DROP VIEW rlmm_stuck_v;
DROP INDEX rlmm_partitions_deleting_idx;
DROP INDEX rlmm_segments_in_flight_idx;
