-- +goose Up
-- rlmm:compatible-with 2
-- What the schema keeps true whoever writes, now that old code and DBAs
-- write beside the library. Expand-only: code of schema 2 and later sends
-- the same statements and never writes what the new triggers refuse.
--
-- 1. An epoch row always has its segment. Migration 00007 dropped the
--    foreign key from rlmm_segment_epochs to rlmm_segments and kept its
--    DELETE and TRUNCATE side with triggers; a DBA's UPDATE of a segment's
--    identity, or an INSERT of an epoch row for a segment that does not
--    exist, was then accepted and made lookups miss. Both are refused again
--    with SQLSTATE 23503, as schema 6 refused them:
--    - the identity of a segment row and of an epoch row (topic_id,
--      partition, segment_id) cannot change; the library never changes it,
--      so the triggers, limited to those columns, never fire for it;
--    - an INSERT into rlmm_segment_epochs checks that each row's segment
--      exists in its partition (one probe of rlmm_segments_segment_id_key,
--      with a plan that cannot depend on statistics).
-- 2. rlmm_epoch_ends follows every COPY_SEGMENT_FINISHED, whoever writes
--    it. Code of schema 2 (before 00004) does not raise it; brokers still
--    on that code during a rolling upgrade left EpochEndOffset low and
--    FirstSegmentForTimestamp missing segments. A trigger on the first
--    finish of a segment (finished_version set) raises the epoch ends as
--    the library's SegmentUpdate does; after the library's own statement
--    it finds them raised and changes nothing. The function
--    rlmm_raise_epoch_ends() raises what earlier finishes missed, bumping
--    the version of each partition it changes (and notifying it) so that
--    caches see it; it is idempotent, and this migration runs it once.

-- +goose StatementBegin
CREATE FUNCTION rlmm_identity_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'foreign_key_violation', CONSTRAINT = TG_TABLE_NAME || '_identity', TABLE = TG_TABLE_NAME,
        MESSAGE = format('%s: segment %s (topic id %s, partition %s) cannot become segment %s (topic id %s, partition %s): the identity of a segment and of its epoch rows never changes, and the epoch rows must keep naming their segment. Add the segment under its new identity instead',
                         TG_TABLE_NAME, OLD.segment_id, OLD.topic_id, OLD.partition, NEW.segment_id, NEW.topic_id, NEW.partition);
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION rlmm_identity_guard() IS 'Trigger rlmm_segments_identity and rlmm_segment_epochs_identity: refuses (23503) a change of topic_id, partition or segment_id, which would part epoch rows from their segment.';
CREATE TRIGGER rlmm_segments_identity
    BEFORE UPDATE OF topic_id, partition, segment_id ON rlmm_segments
    FOR EACH ROW WHEN (OLD.topic_id IS DISTINCT FROM NEW.topic_id OR OLD.partition IS DISTINCT FROM NEW.partition OR OLD.segment_id IS DISTINCT FROM NEW.segment_id)
    EXECUTE FUNCTION rlmm_identity_guard();
CREATE TRIGGER rlmm_segment_epochs_identity
    BEFORE UPDATE OF topic_id, partition, segment_id ON rlmm_segment_epochs
    FOR EACH ROW WHEN (OLD.topic_id IS DISTINCT FROM NEW.topic_id OR OLD.partition IS DISTINCT FROM NEW.partition OR OLD.segment_id IS DISTINCT FROM NEW.segment_id)
    EXECUTE FUNCTION rlmm_identity_guard();

-- The two triggers on the library's path run static SQL, planned once per
-- session, on the tables of the schema they were created in (search_path
-- FROM CURRENT: the migration's), where dynamic SQL would be planned anew
-- at every call.
-- +goose StatementBegin
CREATE FUNCTION rlmm_segment_epochs_have_segment() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    -- "s.segment_id = … AND (…) IS TRUE": only rlmm_segments_segment_id_key
    -- answers it (see queries/segments.sql).
    PERFORM FROM rlmm_segments s
    WHERE s.segment_id = NEW.segment_id AND (s.topic_id = NEW.topic_id AND s.partition = NEW.partition) IS TRUE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING
            ERRCODE = 'foreign_key_violation', CONSTRAINT = 'rlmm_segment_epochs_segment_fkey', TABLE = 'rlmm_segment_epochs',
            MESSAGE = format('epoch %s of segment %s (topic id %s, partition %s): no such segment in rlmm_segments; an epoch row must name an existing segment of its partition (rlmm_segment_epochs_segment_fkey)',
                             NEW.epoch, NEW.segment_id, NEW.topic_id, NEW.partition);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION rlmm_segment_epochs_have_segment() IS 'Trigger rlmm_segment_epochs_have_segment: refuses (23503, rlmm_segment_epochs_segment_fkey) an epoch row whose segment does not exist in its partition.';
-- AFTER: the library inserts a segment and its epoch rows in one statement,
-- and the check runs once the whole statement has.
CREATE TRIGGER rlmm_segment_epochs_have_segment
    AFTER INSERT ON rlmm_segment_epochs
    FOR EACH ROW EXECUTE FUNCTION rlmm_segment_epochs_have_segment();

-- +goose StatementBegin
CREATE FUNCTION rlmm_segments_raise_epoch_ends() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    -- The ranges of the segment's epochs, from its own row: epoch i runs
    -- from epoch_start_offsets[i] to the next start - 1, the last to
    -- end_offset. As SegmentUpdate's epoch_ends CTE, never lowering.
    INSERT INTO rlmm_epoch_ends AS ee (topic_id, partition, epoch, end_offset, max_segment_span, raised_version)
    SELECT NEW.topic_id, NEW.partition, u.epoch, coalesce(lead(u.first_offset) OVER (ORDER BY u.n) - 1, NEW.end_offset),
           NEW.end_offset - NEW.start_offset, NEW.last_version
    FROM unnest(NEW.epochs, NEW.epoch_start_offsets) WITH ORDINALITY AS u (epoch, first_offset, n)
    ON CONFLICT (topic_id, partition, epoch) DO UPDATE
    SET end_offset = greatest(ee.end_offset, excluded.end_offset),
        max_segment_span = greatest(ee.max_segment_span, excluded.max_segment_span),
        raised_version = excluded.raised_version
    WHERE excluded.end_offset > ee.end_offset OR excluded.max_segment_span > ee.max_segment_span;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION rlmm_segments_raise_epoch_ends() IS 'Trigger rlmm_segments_raise_epoch_ends: the first COPY_SEGMENT_FINISHED of a segment raises rlmm_epoch_ends, whatever code wrote it (code older than migration 00004 does not raise it itself).';
CREATE TRIGGER rlmm_segments_raise_epoch_ends
    AFTER UPDATE OF finished_version ON rlmm_segments
    FOR EACH ROW WHEN (OLD.finished_version IS NULL AND NEW.finished_version IS NOT NULL)
    EXECUTE FUNCTION rlmm_segments_raise_epoch_ends();

-- +goose StatementBegin
CREATE FUNCTION rlmm_raise_epoch_ends() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    bumped record;
    partitions bigint := 0;
BEGIN
    -- The tables of the first schema of the search_path. Each partition
    -- whose finished epoch rows reach past its epoch ends is bumped to a
    -- new version (locking its row, as every write does first), its epoch
    -- ends raised at that version, and the change notified at commit.
    FOR bumped IN EXECUTE format($q$
        WITH want AS (
            SELECT e.topic_id, e.partition, e.epoch, max(e.last_offset) AS end_offset,
                   max(e.segment_end_offset - e.segment_start_offset) AS max_segment_span
            FROM %1$I.rlmm_segment_epochs e
            WHERE e.finished_version IS NOT NULL
            GROUP BY e.topic_id, e.partition, e.epoch
        ), missing AS (
            SELECT w.* FROM want w
            LEFT JOIN %1$I.rlmm_epoch_ends ee ON ee.topic_id = w.topic_id AND ee.partition = w.partition AND ee.epoch = w.epoch
            WHERE ee.epoch IS NULL OR w.end_offset > ee.end_offset OR w.max_segment_span > ee.max_segment_span
        ), bumped AS (
            UPDATE %1$I.rlmm_partitions p SET version = p.version + 1, updated_at = now()
            WHERE (p.topic_id, p.partition) IN (SELECT m.topic_id, m.partition FROM missing m)
              AND p.delete_state IS DISTINCT FROM 2
            RETURNING p.topic_id, p.partition, p.version
        ), raised AS (
            INSERT INTO %1$I.rlmm_epoch_ends AS ee (topic_id, partition, epoch, end_offset, max_segment_span, raised_version)
            SELECT m.topic_id, m.partition, m.epoch, m.end_offset, m.max_segment_span, b.version
            FROM missing m JOIN bumped b ON b.topic_id = m.topic_id AND b.partition = m.partition
            ON CONFLICT (topic_id, partition, epoch) DO UPDATE
            SET end_offset = greatest(ee.end_offset, excluded.end_offset),
                max_segment_span = greatest(ee.max_segment_span, excluded.max_segment_span),
                raised_version = excluded.raised_version
        )
        SELECT b.topic_id, b.partition, b.version FROM bumped b$q$, current_schema())
    LOOP
        PERFORM pg_notify('rlmm_changes', bumped.topic_id::text || '/' || bumped.partition || '/' || bumped.version);
        partitions := partitions + 1;
    END LOOP;
    RETURN partitions;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION rlmm_raise_epoch_ends() IS 'Raises rlmm_epoch_ends to what the finished epoch rows still stored say, for finishes that did not raise it (code older than migration 00004); bumps and notifies each partition it changes, so caches see it. Idempotent; returns the number of partitions changed. Tables of the first schema of the search_path.';
SELECT rlmm_raise_epoch_ends();

-- +goose Down
DROP FUNCTION rlmm_raise_epoch_ends();
DROP TRIGGER rlmm_segments_raise_epoch_ends ON rlmm_segments;
DROP FUNCTION rlmm_segments_raise_epoch_ends();
DROP TRIGGER rlmm_segment_epochs_have_segment ON rlmm_segment_epochs;
DROP FUNCTION rlmm_segment_epochs_have_segment();
DROP TRIGGER rlmm_segment_epochs_identity ON rlmm_segment_epochs;
DROP TRIGGER rlmm_segments_identity ON rlmm_segments;
DROP FUNCTION rlmm_identity_guard();
