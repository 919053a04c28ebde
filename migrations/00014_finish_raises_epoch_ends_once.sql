-- +goose Up
-- rlmm:compatible-with 2
-- The library's COPY_SEGMENT_FINISHED raises the epoch ends once, not twice.
-- Expand-only: a nullable column (no default: no table rewrite) and the
-- trigger of 00012 recreated with one more condition.
--
-- SegmentUpdate raises rlmm_epoch_ends in its own statement (from 00004 on),
-- and 00012's trigger rlmm_segments_raise_epoch_ends raised them again on
-- every first finish, for the code of schema 2 that does not. The second
-- raise finds nothing to raise, yet its PL/pgSQL call and upsert (which
-- locks the epoch-ends row it conflicts with) took 90 to 105 µs of server
-- time per finish in EXPLAIN ANALYZE, against 900 to 1,400 µs of server CPU
-- for the whole add + finish. The library now marks the rows it finishes
-- (epoch_ends_raised), and the trigger skips them. Code older than this
-- migration never sets the column, so the trigger keeps raising the epoch
-- ends of every segment it finishes, as before.
ALTER TABLE rlmm_segments ADD COLUMN epoch_ends_raised boolean;
COMMENT ON COLUMN rlmm_segments.epoch_ends_raised IS 'True when the write that finished the segment (COPY_SEGMENT_FINISHED) raised rlmm_epoch_ends itself, as the library does from migration 00014 on; NULL otherwise, and then the trigger rlmm_segments_raise_epoch_ends raises them.';
DROP TRIGGER rlmm_segments_raise_epoch_ends ON rlmm_segments;
CREATE TRIGGER rlmm_segments_raise_epoch_ends
    AFTER UPDATE OF finished_version ON rlmm_segments
    FOR EACH ROW WHEN (OLD.finished_version IS NULL AND NEW.finished_version IS NOT NULL AND NEW.epoch_ends_raised IS NOT TRUE)
    EXECUTE FUNCTION rlmm_segments_raise_epoch_ends();
COMMENT ON FUNCTION rlmm_segments_raise_epoch_ends() IS 'Trigger rlmm_segments_raise_epoch_ends: the first COPY_SEGMENT_FINISHED of a segment raises rlmm_epoch_ends when the write did not raise them itself (epoch_ends_raised not true: code older than migration 00014, which raises them in its own statement from 00004 on or not at all before, and a manual UPDATE).';

-- +goose Down
DROP TRIGGER rlmm_segments_raise_epoch_ends ON rlmm_segments;
CREATE TRIGGER rlmm_segments_raise_epoch_ends
    AFTER UPDATE OF finished_version ON rlmm_segments
    FOR EACH ROW WHEN (OLD.finished_version IS NULL AND NEW.finished_version IS NOT NULL)
    EXECUTE FUNCTION rlmm_segments_raise_epoch_ends();
COMMENT ON FUNCTION rlmm_segments_raise_epoch_ends() IS 'Trigger rlmm_segments_raise_epoch_ends: the first COPY_SEGMENT_FINISHED of a segment raises rlmm_epoch_ends, whatever code wrote it (code older than migration 00004 does not raise it itself).';
ALTER TABLE rlmm_segments DROP COLUMN epoch_ends_raised;
