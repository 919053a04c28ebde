-- name: SegmentGet :one
-- Every stored field of one segment, forgotten or not, and its partition's
-- delete state.
SELECT s.topic_id, s.topic, s.partition, s.segment_id, s.start_offset, s.end_offset,
       s.max_timestamp_ms, s.broker_id, s.event_timestamp_ms, s.segment_size_bytes,
       s.custom_metadata, s.state, s.txn_index_empty, s.epochs, s.epoch_start_offsets,
       p.delete_state, s.created_at, s.updated_at
FROM rlmm_segments s
JOIN rlmm_partitions p ON p.topic_id = s.topic_id AND p.partition = s.partition
WHERE s.segment_id = @segment_id;

-- name: SegmentLocate :one
-- The partition and state of one segment: the library addresses a segment
-- by its partition too.
SELECT topic_id, topic, partition, state FROM rlmm_segments WHERE segment_id = @segment_id;
