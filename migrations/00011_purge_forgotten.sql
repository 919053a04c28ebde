-- +goose NO TRANSACTION
-- +goose Up
-- rlmm:compatible-with 2
-- Purging: what is forgotten (a segment in DELETE_SEGMENT_FINISHED, or any
-- segment of a partition in DELETE_PARTITION_FINISHED) is deleted once it
-- has been forgotten for the retention (PgManager.PurgeForgotten, purge.go).
-- Expand-only: one column with a constant default (no table rewrite) and two
-- partial indexes built concurrently. Code of schema 2 and later never names
-- them; its statements name their columns, so a new column changes nothing
-- for it.
--
-- rlmm_partitions is altered first, then rlmm_segments, the order every
-- writer locks them in.

-- purged_version marks the one write the delete guard below lets take a
-- finished partition's delete record: the purge's, which stamps it with the
-- version it writes. (Caches learn of purged segment rows from migration
-- 00010's vanished_version.) No write of a broker changes it, so the
-- partition row's updates stay HOT.
ALTER TABLE rlmm_partitions ADD COLUMN IF NOT EXISTS purged_version bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN rlmm_partitions.purged_version IS 'The version of the last purge write that took the partition''s finished delete record (0: none); the delete guard lets only such a write take it.';

-- Each index is dropped first in case an earlier, interrupted run of this
-- file left it INVALID (goose records a NO TRANSACTION file only once it
-- completes).
-- The forgotten segments by the time they were forgotten, oldest first: a
-- purge batch reads the front of this index, O(batch), however many live
-- segments the table holds. Every update of a segment already changes an
-- indexed column (state), so this index costs no HOT update.
DROP INDEX CONCURRENTLY IF EXISTS rlmm_segments_forgotten_idx;
CREATE INDEX CONCURRENTLY rlmm_segments_forgotten_idx ON rlmm_segments (updated_at)
    WHERE state = 3;
COMMENT ON INDEX rlmm_segments_forgotten_idx IS 'The segments in DELETE_SEGMENT_FINISHED by when they got there: what PurgeForgotten reads.';

-- The partitions whose delete finished. Not on updated_at, which every write
-- changes: indexing it would make the partition rows' updates non-HOT.
DROP INDEX CONCURRENTLY IF EXISTS rlmm_partitions_deleted_idx;
CREATE INDEX CONCURRENTLY rlmm_partitions_deleted_idx ON rlmm_partitions (topic_id, partition)
    WHERE delete_state = 2;
COMMENT ON INDEX rlmm_partitions_deleted_idx IS 'The partitions in DELETE_PARTITION_FINISHED: what PurgeForgotten reads.';

-- The delete guard of 00002, with the one exception marked "00011": the
-- purge's own UPDATE that takes a finished partition's delete record.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION rlmm_partitions_delete_state_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    allowed   boolean;
    from_name text;
    to_name   text;
    targets   text;
BEGIN
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I.rlmm_partition_delete_transitions WHERE from_state = $1 AND to_state = $2)',
                   TG_TABLE_SCHEMA)
        INTO allowed USING coalesce(OLD.delete_state, -1), coalesce(NEW.delete_state, -1);
    -- 00011: the purge (PurgeForgotten) takes the delete record of a
    -- partition whose delete finished long enough ago and whose segments it
    -- has all deleted, so that adds work again. It is the only write that
    -- stamps purged_version with the version it writes.
    IF NOT allowed AND OLD.delete_state = 2 AND NEW.delete_state IS NULL
       AND NEW.version > OLD.version AND NEW.purged_version = NEW.version THEN
        EXECUTE format('SELECT NOT EXISTS (SELECT 1 FROM %I.rlmm_segments WHERE topic_id = $1 AND partition = $2)',
                       TG_TABLE_SCHEMA)
            INTO allowed USING OLD.topic_id, OLD.partition;
    END IF;
    IF NOT allowed THEN
        EXECUTE format('SELECT (SELECT name FROM %1$I.rlmm_partition_delete_states WHERE state = $1),
                               (SELECT name FROM %1$I.rlmm_partition_delete_states WHERE state = $2),
                               (SELECT string_agg(st.name, '' or '' ORDER BY st.state)
                                FROM %1$I.rlmm_partition_delete_transitions t
                                JOIN %1$I.rlmm_partition_delete_states st ON st.state = t.to_state
                                WHERE t.from_state = $1 AND t.to_state <> $1)',
                       TG_TABLE_SCHEMA)
            INTO from_name, to_name, targets USING coalesce(OLD.delete_state, -1), coalesce(NEW.delete_state, -1);
        RAISE EXCEPTION USING
            ERRCODE = 'check_violation',
            CONSTRAINT = 'rlmm_partitions_delete_state_transition',
            MESSAGE = format('partition %s-%s (topic id %s): delete state %s -> %s is not an allowed transition; %s. Repair through the library: rlmmctl partitions set-delete-state --topic-id %s --partition %s <STATE>',
                             OLD.topic, OLD.partition, OLD.topic_id,
                             coalesce(from_name, 'state ' || OLD.delete_state), coalesce(to_name, 'unknown state ' || NEW.delete_state),
                             CASE WHEN targets IS NULL THEN format('a partition in %s never changes delete state again', from_name)
                                  ELSE format('from %s a partition may only move to %s', from_name, targets) END,
                             OLD.topic_id, OLD.partition),
            HINT = 'The allowed transitions are in rlmm_partition_delete_transitions (statemachine.go); see README, "Repairing by hand".';
    END IF;
    -- The library bumps the version in the same UPDATE; a manual UPDATE
    -- that does not is bumped here, and notified at commit, so that CaughtUp
    -- and the managers' caches see the repair.
    IF NEW.version = OLD.version THEN
        NEW.version := OLD.version + 1;
        NEW.updated_at := now();
        PERFORM pg_notify('rlmm_changes', NEW.topic_id::text || '/' || NEW.partition || '/' || NEW.version);
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION rlmm_partitions_delete_state_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    allowed   boolean;
    from_name text;
    to_name   text;
    targets   text;
BEGIN
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I.rlmm_partition_delete_transitions WHERE from_state = $1 AND to_state = $2)',
                   TG_TABLE_SCHEMA)
        INTO allowed USING coalesce(OLD.delete_state, -1), coalesce(NEW.delete_state, -1);
    IF NOT allowed THEN
        EXECUTE format('SELECT (SELECT name FROM %1$I.rlmm_partition_delete_states WHERE state = $1),
                               (SELECT name FROM %1$I.rlmm_partition_delete_states WHERE state = $2),
                               (SELECT string_agg(st.name, '' or '' ORDER BY st.state)
                                FROM %1$I.rlmm_partition_delete_transitions t
                                JOIN %1$I.rlmm_partition_delete_states st ON st.state = t.to_state
                                WHERE t.from_state = $1 AND t.to_state <> $1)',
                       TG_TABLE_SCHEMA)
            INTO from_name, to_name, targets USING coalesce(OLD.delete_state, -1), coalesce(NEW.delete_state, -1);
        RAISE EXCEPTION USING
            ERRCODE = 'check_violation',
            CONSTRAINT = 'rlmm_partitions_delete_state_transition',
            MESSAGE = format('partition %s-%s (topic id %s): delete state %s -> %s is not an allowed transition; %s. Repair through the library: rlmmctl partitions set-delete-state --topic-id %s --partition %s <STATE>',
                             OLD.topic, OLD.partition, OLD.topic_id,
                             coalesce(from_name, 'state ' || OLD.delete_state), coalesce(to_name, 'unknown state ' || NEW.delete_state),
                             CASE WHEN targets IS NULL THEN format('a partition in %s never changes delete state again', from_name)
                                  ELSE format('from %s a partition may only move to %s', from_name, targets) END,
                             OLD.topic_id, OLD.partition),
            HINT = 'The allowed transitions are in rlmm_partition_delete_transitions (statemachine.go); see README, "Repairing by hand".';
    END IF;
    -- The library bumps the version in the same UPDATE; a manual UPDATE
    -- that does not is bumped here, and notified at commit, so that CaughtUp
    -- and the managers' caches see the repair.
    IF NEW.version = OLD.version THEN
        NEW.version := OLD.version + 1;
        NEW.updated_at := now();
        PERFORM pg_notify('rlmm_changes', NEW.topic_id::text || '/' || NEW.partition || '/' || NEW.version);
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
DROP INDEX CONCURRENTLY IF EXISTS rlmm_partitions_deleted_idx;
DROP INDEX CONCURRENTLY IF EXISTS rlmm_segments_forgotten_idx;
ALTER TABLE rlmm_partitions DROP COLUMN IF EXISTS purged_version;
