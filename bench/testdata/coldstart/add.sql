-- The library's add (queries/segments.sql, SegmentAdd) with literal arguments,
-- a new segment id each time, for pgbench.
\set n random(1, 9000000000000)
WITH partition_row AS (
    INSERT INTO rlmm_partitions AS p (topic_id, partition, topic, version, max_epoch_span, max_segment_span)
    VALUES ('6742701a-dc04-4785-9f35-a078fe4123c1'::uuid, 0, 't', 1, 99, 99)
    ON CONFLICT (topic_id, partition) DO UPDATE
    SET version = p.version + 1,
        max_epoch_span = greatest(p.max_epoch_span, excluded.max_epoch_span),
        max_segment_span = greatest(p.max_segment_span, excluded.max_segment_span),
        updated_at = now()
    WHERE p.delete_state IS NULL
    RETURNING p.topic_id, p.partition, p.version
), segment AS (
    INSERT INTO rlmm_segments (
        topic_id, partition, segment_id, topic, start_offset, end_offset,
        max_timestamp_ms, broker_id, event_timestamp_ms, segment_size_bytes,
        custom_metadata, state, txn_index_empty, epochs, epoch_start_offsets, added_version, last_version)
    SELECT '6742701a-dc04-4785-9f35-a078fe4123c1'::uuid, 0, lpad(to_hex(:n), 32, '0')::uuid, 't', 0, 99,
        0, 1, 0, 100, NULL, 0::smallint, true, '{0}'::integer[], '{0}'::bigint[], partition_row.version, partition_row.version
    FROM partition_row
    RETURNING added_version
), epochs AS (
    INSERT INTO rlmm_segment_epochs (
        topic_id, partition, segment_id, epoch, first_offset, last_offset, state,
        segment_start_offset, segment_end_offset, added_version, last_version, segment_size_bytes, max_timestamp_ms)
    SELECT '6742701a-dc04-4785-9f35-a078fe4123c1'::uuid, 0, lpad(to_hex(:n), 32, '0')::uuid,
        ('{0}'::integer[])[i], ('{0}'::bigint[])[i], ('{99}'::bigint[])[i], 0::smallint,
        0, 99, segment.added_version, segment.added_version, 100, 0
    FROM segment, generate_subscripts('{0}'::integer[], 1) AS i
)
SELECT segment.added_version FROM segment;
