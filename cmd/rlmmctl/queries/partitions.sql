-- name: PartitionsSummary :many
-- One line of `partitions list` per partition of the topic ids given,
-- optionally only those of one topic name: the segments per state
-- (0 COPY_SEGMENT_STARTED ... 3 DELETE_SEGMENT_FINISHED), the bytes of the
-- segments not forgotten, the delete state and the last write. The ids
-- (PartitionTopicIDs, AllTopicIDs or the one asked for) lead the plan
-- through the primary key, and each partition's segments are counted
-- through its own index range (a LATERAL aggregate), whatever the planner
-- believes of the tables' sizes.
SELECT p.topic, p.topic_id, p.partition,
       c.copy_started, c.copy_finished, c.delete_started, c.delete_finished, c.live_bytes,
       p.delete_state,
       greatest(p.updated_at, c.last_change)::timestamptz AS last_change
FROM rlmm_partitions p
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE s.state = 0) AS copy_started,
           count(*) FILTER (WHERE s.state = 1) AS copy_finished,
           count(*) FILTER (WHERE s.state = 2) AS delete_started,
           count(*) FILTER (WHERE s.state = 3) AS delete_finished,
           coalesce(sum(s.segment_size_bytes) FILTER (
               WHERE s.state IN (0, 1, 2) AND p.delete_state IS DISTINCT FROM 2), 0)::bigint AS live_bytes,
           max(s.updated_at) AS last_change
    FROM rlmm_segments s
    WHERE s.topic_id = p.topic_id AND s.partition = p.partition
) c
WHERE p.topic_id = ANY(@topic_ids::uuid[])
  AND (sqlc.narg('topic')::text IS NULL OR p.topic = sqlc.narg('topic'))
ORDER BY p.topic, p.topic_id, p.partition;

-- name: AllTopicIDs :many
-- Every topic id the store knows, for `partitions list` without a filter.
SELECT DISTINCT topic_id FROM rlmm_partitions;

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
