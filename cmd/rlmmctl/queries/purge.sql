-- name: PurgeCutoff :one
-- One cutoff for the whole run, from the database's clock, which is the
-- clock that wrote updated_at.
SELECT (now() - make_interval(secs => @older_than_seconds::float8))::timestamptz AS cutoff;

-- name: PurgePreview :many
-- Per topic, what PurgeForgotten would purge for the cutoff, and the bytes,
-- epoch rows and custom metadata of those segments: the segments in
-- DELETE_SEGMENT_FINISHED (3) since before it, and every segment of a
-- partition in DELETE_PARTITION_FINISHED (2) since before it. Each part is
-- read through the partial index the purge reads it by
-- (rlmm_segments_forgotten_idx, rlmm_partitions_deleted_idx), so the dry
-- run costs what it finds, not the size of the tables.
WITH candidates AS (
    SELECT s.topic, s.topic_id, s.partition, s.segment_id, s.segment_size_bytes,
           octet_length(s.custom_metadata) AS custom_metadata_bytes
    FROM rlmm_segments s
    WHERE s.state = 3 AND s.updated_at <= @cutoff::timestamptz
    UNION
    SELECT s.topic, s.topic_id, s.partition, s.segment_id, s.segment_size_bytes,
           octet_length(s.custom_metadata)
    FROM rlmm_partitions p
    JOIN rlmm_segments s ON s.topic_id = p.topic_id AND s.partition = p.partition
    WHERE p.delete_state = 2 AND p.updated_at <= @cutoff::timestamptz
)
SELECT c.topic, c.topic_id, count(*) AS segments,
       coalesce(sum(c.segment_size_bytes), 0)::bigint AS segment_bytes,
       coalesce(sum(ec.n), 0)::bigint AS epoch_rows,
       coalesce(sum(c.custom_metadata_bytes), 0)::bigint AS custom_metadata_bytes
FROM candidates c
CROSS JOIN LATERAL (
    SELECT count(*) AS n FROM rlmm_segment_epochs e
    WHERE e.topic_id = c.topic_id AND e.partition = c.partition AND e.segment_id = c.segment_id) ec
GROUP BY c.topic, c.topic_id;
