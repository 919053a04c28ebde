-- name: StuckWork :many
-- The rows of rlmm_stuck_v (which decides what counts as stuck) that have
-- made no progress for @older_than_ms milliseconds, oldest first. The
-- bound on since lets the partial indexes of 00005 find only those rows.
SELECT v.kind, v.topic, v.partition, v.segment_id, v.state, v.state_code, v.broker_id,
       v.since, (extract(epoch FROM v.age) * 1000)::bigint AS age_ms, v.event_time,
       -- NULL for a partition: 0 here, the kind tells.
       coalesce(v.start_offset, 0)::bigint AS start_offset, coalesce(v.end_offset, 0)::bigint AS end_offset,
       coalesce(v.size_bytes, 0)::bigint AS size_bytes, v.topic_id
FROM rlmm_stuck_v v
WHERE v.since < now() - (sqlc.arg('older_than_ms')::bigint * interval '1 millisecond')
ORDER BY v.since, v.topic, v.partition, v.segment_id;

-- name: StuckCounts :many
-- How many rows of rlmm_stuck_v are older than @older_than_ms, per kind
-- and state: the rlmm_stuck_* gauges.
SELECT v.kind, v.state, count(*)::bigint AS stuck
FROM rlmm_stuck_v v
WHERE v.since < now() - (sqlc.arg('older_than_ms')::bigint * interval '1 millisecond')
GROUP BY v.kind, v.state;
