-- name: PurgeCutoff :one
-- One cutoff for the whole run, from the database's clock, which is the
-- clock that wrote updated_at.
SELECT (now() - make_interval(secs => @older_than_seconds::float8))::timestamptz AS cutoff;

-- name: PurgePreview :many
-- Per topic, what PurgeForgotten would purge for the cutoff: the segments
-- in DELETE_SEGMENT_FINISHED (3) since before it, or of a partition in
-- DELETE_PARTITION_FINISHED (2) since before it; their bytes, epoch rows
-- and custom metadata.
SELECT s.topic, s.topic_id, count(*) AS segments,
       coalesce(sum(s.segment_size_bytes), 0)::bigint AS segment_bytes,
       coalesce(sum(ec.n), 0)::bigint AS epoch_rows,
       coalesce(sum(octet_length(s.custom_metadata)), 0)::bigint AS custom_metadata_bytes
FROM (
    SELECT s.topic_id, s.partition, s.segment_id, s.topic, s.segment_size_bytes, s.custom_metadata
    FROM rlmm_segments s
    JOIN rlmm_partitions p ON p.topic_id = s.topic_id AND p.partition = s.partition
    WHERE (s.state = 3 AND s.updated_at <= @cutoff::timestamptz)
       OR (p.delete_state = 2 AND p.updated_at <= @cutoff::timestamptz)
) s
CROSS JOIN LATERAL (
    SELECT count(*) AS n FROM rlmm_segment_epochs e
    WHERE e.topic_id = s.topic_id AND e.partition = s.partition AND e.segment_id = s.segment_id) ec
GROUP BY s.topic, s.topic_id;
