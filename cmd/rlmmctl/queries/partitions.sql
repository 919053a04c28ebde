-- name: PartitionsSummary :many
-- One line of `partitions list` per partition, optionally of one topic name
-- or one topic id: the segments per state (0 COPY_SEGMENT_STARTED ...
-- 3 DELETE_SEGMENT_FINISHED), the bytes of the segments not forgotten, the
-- delete state and the last write.
SELECT p.topic, p.topic_id, p.partition,
       count(s.segment_id) FILTER (WHERE s.state = 0) AS copy_started,
       count(s.segment_id) FILTER (WHERE s.state = 1) AS copy_finished,
       count(s.segment_id) FILTER (WHERE s.state = 2) AS delete_started,
       count(s.segment_id) FILTER (WHERE s.state = 3) AS delete_finished,
       coalesce(sum(s.segment_size_bytes) FILTER (
           WHERE s.state IN (0, 1, 2) AND p.delete_state IS DISTINCT FROM 2), 0)::bigint AS live_bytes,
       p.delete_state,
       greatest(p.updated_at, max(s.updated_at))::timestamptz AS last_change
FROM rlmm_partitions p
LEFT JOIN rlmm_segments s ON s.topic_id = p.topic_id AND s.partition = p.partition
WHERE (sqlc.narg('topic')::text IS NULL OR p.topic = sqlc.narg('topic'))
  AND (sqlc.narg('topic_id')::uuid IS NULL OR p.topic_id = sqlc.narg('topic_id'))
GROUP BY p.topic_id, p.partition
ORDER BY p.topic, p.topic_id, p.partition;

-- name: PartitionDeleteState :one
-- The delete state of one partition (NULL: none); no row when the store
-- has never heard of it.
SELECT delete_state FROM rlmm_partitions WHERE topic_id = @topic_id AND partition = @partition;

-- name: PartitionTopicName :one
-- The name of a topic id, for people (any partition carries it).
SELECT topic FROM rlmm_partitions WHERE topic_id = @topic_id LIMIT 1;

-- name: PartitionTopicIDs :many
-- The ids a topic name has had: a deleted and recreated topic keeps its
-- name but gets a new id.
SELECT DISTINCT topic_id FROM rlmm_partitions WHERE topic = @topic;
