-- +goose Up
-- rlmm:compatible-with 2
-- The epoch rows carry their segment's size and largest timestamp, so that
-- RemoteLogSize and FirstSegmentForTimestamp read one range of the epoch's
-- rows instead of a range of rlmm_segments bounded by more probes.
-- Expand-only: two nullable columns (no default: no table rewrite), no
-- backfill, and a trigger for manual repairs.
--
-- docs/BENCHMARKS.md has what it changed.
--
-- NULL means "not copied": rows written before this migration, by code
-- older than it, or by hand. The statements that read the copies fall back
-- to the segment's row for those (queries/segments.sql, epochs.sql), so neither old code
-- nor a backfill has to fill them; the fallback costs a probe per such row,
-- and retention replaces them with rows that carry the copies.
ALTER TABLE rlmm_segment_epochs ADD COLUMN segment_size_bytes integer, ADD COLUMN max_timestamp_ms bigint;
COMMENT ON COLUMN rlmm_segment_epochs.segment_size_bytes IS 'Copy of the segment''s segment_size_bytes (RemoteLogSize sums it); NULL: not copied (rows older than migration 00015, or written by older code or by hand), read from the segment instead.';
COMMENT ON COLUMN rlmm_segment_epochs.max_timestamp_ms IS 'Copy of the segment''s max_timestamp_ms (FirstSegmentForTimestamp filters on it); NULL: not copied, read from the segment instead.';

-- FirstSegmentForTimestamp's fallback for a row without the copy. The
-- planner costs a sub-select in a filter as if it ran for every row the walk
-- passes, and then judged the generic plan so dear that it planned the
-- statement anew on every call (0.2 to 0.3 ms each, on analyzed tables); a
-- function declared cheap keeps the generic plan. It runs only for rows
-- without the copy.
-- +goose StatementBegin
CREATE FUNCTION rlmm_segment_max_timestamp_ms(topic_id uuid, partition integer, segment_id uuid) RETURNS bigint
    LANGUAGE plpgsql STABLE COST 10
    AS $$
DECLARE
    max_timestamp_ms bigint;
BEGIN
    -- "segment_id = … AND (…) IS TRUE": only rlmm_segments_segment_id_key
    -- answers it (see queries/segments.sql).
    EXECUTE format('SELECT s.max_timestamp_ms FROM %I.rlmm_segments s
                    WHERE s.segment_id = $1 AND (s.topic_id = $2 AND s.partition = $3) IS TRUE', current_schema())
        INTO max_timestamp_ms USING segment_id, topic_id, partition;
    RETURN max_timestamp_ms;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION rlmm_segment_max_timestamp_ms(uuid, integer, uuid) IS 'The max_timestamp_ms of a segment, for an epoch row without its copy (rlmm_segment_epochs.max_timestamp_ms NULL). Tables of the first schema of the search_path.';

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
DROP FUNCTION rlmm_segment_max_timestamp_ms(uuid, integer, uuid);
ALTER TABLE rlmm_segment_epochs DROP COLUMN segment_size_bytes, DROP COLUMN max_timestamp_ms;
