-- +goose Up
-- rlmm:compatible-with 2
-- The epoch rows carry their segment's size and largest timestamp, so that
-- RemoteLogSize and FirstSegmentForTimestamp read one range of the epoch's
-- rows instead of bounding a range of rlmm_segments by two more probes.
-- Expand-only: two nullable columns (no default: no table rewrite), no
-- backfill, and a trigger for manual repairs.
--
-- docs/BENCHMARKS.md has what it changed.
--
-- NULL means "not copied": rows written before this migration, by code
-- older than it, or by hand. The statements that read the copies fall back
-- to the segment's row for those (queries/segments.sql), so neither old code
-- nor a backfill has to fill them; the fallback costs a probe per such row,
-- and retention replaces them with rows that carry the copies.
ALTER TABLE rlmm_segment_epochs ADD COLUMN segment_size_bytes integer, ADD COLUMN max_timestamp_ms bigint;
COMMENT ON COLUMN rlmm_segment_epochs.segment_size_bytes IS 'Copy of the segment''s segment_size_bytes (RemoteLogSize sums it); NULL: not copied (rows older than migration 00015, or written by older code or by hand), read from the segment instead.';
COMMENT ON COLUMN rlmm_segment_epochs.max_timestamp_ms IS 'Copy of the segment''s max_timestamp_ms (FirstSegmentForTimestamp filters on it); NULL: not copied, read from the segment instead.';

-- The library never changes a segment's size or largest timestamp after
-- the add. A manual UPDATE that does reaches the copies.
-- +goose StatementBegin
CREATE FUNCTION rlmm_segments_copy_to_epochs() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    EXECUTE format('UPDATE %I.rlmm_segment_epochs SET segment_size_bytes = $4, max_timestamp_ms = $5
                    WHERE topic_id = $1 AND partition = $2 AND segment_id = $3', TG_TABLE_SCHEMA)
        USING NEW.topic_id, NEW.partition, NEW.segment_id, NEW.segment_size_bytes, NEW.max_timestamp_ms;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION rlmm_segments_copy_to_epochs() IS 'Trigger rlmm_segments_copy_to_epochs: a change of a segment''s segment_size_bytes or max_timestamp_ms (a manual repair: the library never changes them) is copied to its epoch rows.';
CREATE TRIGGER rlmm_segments_copy_to_epochs
    AFTER UPDATE OF segment_size_bytes, max_timestamp_ms ON rlmm_segments
    FOR EACH ROW WHEN (OLD.segment_size_bytes IS DISTINCT FROM NEW.segment_size_bytes OR OLD.max_timestamp_ms IS DISTINCT FROM NEW.max_timestamp_ms)
    EXECUTE FUNCTION rlmm_segments_copy_to_epochs();

-- +goose Down
DROP TRIGGER rlmm_segments_copy_to_epochs ON rlmm_segments;
DROP FUNCTION rlmm_segments_copy_to_epochs();
ALTER TABLE rlmm_segment_epochs DROP COLUMN segment_size_bytes, DROP COLUMN max_timestamp_ms;
