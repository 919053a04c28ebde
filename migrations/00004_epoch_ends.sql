-- +goose Up
-- rlmm:compatible-with 2
-- Code of schema 2 keeps working on this schema. Caveat for the rollout
-- window: a COPY_SEGMENT_FINISHED written by such code does not raise
-- rlmm_epoch_ends, so EpochEndOffset (new code) can answer low for those
-- segments until they are re-finished; see docs/MIGRATIONS.md.
-- For EpochEndOffset and FirstSegmentForTimestamp. Expand-only.

-- EpochEndOffset: per (partition, epoch), the high-water mark of the ends
-- of the epoch's ranges in the segments that reached COPY_SEGMENT_FINISHED.
-- The COPY_SEGMENT_FINISHED statement (queries/segments.sql SegmentUpdate,
-- and the guard trigger for a manual UPDATE) raises it; nothing lowers it,
-- so it outlives the segments it came from.
CREATE TABLE rlmm_epoch_ends (
    topic_id          uuid    NOT NULL,
    partition         integer NOT NULL,
    epoch             integer NOT NULL,
    end_offset        bigint  NOT NULL,
    max_segment_span  bigint  NOT NULL,
    raised_version    bigint  NOT NULL,
    CONSTRAINT rlmm_epoch_ends_pkey PRIMARY KEY (topic_id, partition, epoch),
    CONSTRAINT rlmm_epoch_ends_partition_fkey FOREIGN KEY (topic_id, partition) REFERENCES rlmm_partitions (topic_id, partition),
    CONSTRAINT rlmm_epoch_ends_epoch_check CHECK (epoch >= 0),
    CONSTRAINT rlmm_epoch_ends_end_offset_check CHECK (end_offset >= 0),
    CONSTRAINT rlmm_epoch_ends_max_segment_span_check CHECK (max_segment_span >= 0)
);

COMMENT ON TABLE rlmm_epoch_ends IS 'One row per (partition, leader epoch) that some segment reaching COPY_SEGMENT_FINISHED carried: Kafka''s highest offset for the epoch (EpochEndOffset), never lowered by deletes, ignored once the partition''s delete finished.';
COMMENT ON COLUMN rlmm_epoch_ends.topic_id IS 'Kafka topic id.';
COMMENT ON COLUMN rlmm_epoch_ends.partition IS 'Kafka partition number.';
COMMENT ON COLUMN rlmm_epoch_ends.epoch IS 'Leader epoch.';
COMMENT ON COLUMN rlmm_epoch_ends.end_offset IS 'Largest last_offset of the epoch''s range in any segment that reached COPY_SEGMENT_FINISHED (deleted since or not): what EpochEndOffset answers.';
COMMENT ON COLUMN rlmm_epoch_ends.max_segment_span IS 'Largest end_offset - start_offset of a segment carrying the epoch that reached COPY_SEGMENT_FINISHED: FirstSegmentForTimestamp starts its walk at start offsets >= startingOffset - max_segment_span.';
COMMENT ON COLUMN rlmm_epoch_ends.raised_version IS 'Partition version of the latest write that raised the row: caches catching up read the rows raised after their version.';

-- Backfill: the finished segments already stored, deleted since or not.
INSERT INTO rlmm_epoch_ends (topic_id, partition, epoch, end_offset, max_segment_span, raised_version)
SELECT e.topic_id, e.partition, e.epoch, max(e.last_offset), max(e.segment_end_offset - e.segment_start_offset), p.version
FROM rlmm_segment_epochs e
JOIN rlmm_partitions p ON p.topic_id = e.topic_id AND p.partition = e.partition
WHERE e.finished_version IS NOT NULL
GROUP BY e.topic_id, e.partition, e.epoch, p.version;

-- The guard trigger gives a manual UPDATE to COPY_SEGMENT_FINISHED the
-- library's bookkeeping: now that includes raising the epoch ends. The
-- function is 00002's with the one statement marked "00004" added.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION rlmm_segments_state_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    allowed      boolean;
    from_name    text;
    to_name      text;
    targets      text;
    version      bigint;
    delete_state smallint;
BEGIN
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I.rlmm_segment_transitions WHERE from_state = $1 AND to_state = $2)',
                   TG_TABLE_SCHEMA)
        INTO allowed USING OLD.state, NEW.state;
    IF NOT allowed THEN
        EXECUTE format('SELECT (SELECT name FROM %1$I.rlmm_segment_states WHERE state = $1),
                               (SELECT name FROM %1$I.rlmm_segment_states WHERE state = $2),
                               (SELECT string_agg(st.name, '' or '' ORDER BY st.state)
                                FROM %1$I.rlmm_segment_transitions t
                                JOIN %1$I.rlmm_segment_states st ON st.state = t.to_state
                                WHERE t.from_state = $1 AND t.to_state <> $1)',
                       TG_TABLE_SCHEMA)
            INTO from_name, to_name, targets USING OLD.state, NEW.state;
        RAISE EXCEPTION USING
            ERRCODE = 'check_violation',
            CONSTRAINT = 'rlmm_segments_state_transition',
            MESSAGE = format('segment %s (topic %s, partition %s): %s -> %s is not an allowed transition; %s. Repair through the library: rlmmctl segments set-state %s <STATE>',
                             OLD.segment_id, OLD.topic, OLD.partition,
                             coalesce(from_name, 'state ' || OLD.state), coalesce(to_name, 'unknown state ' || NEW.state),
                             CASE WHEN targets IS NULL THEN format('a segment in %s never changes state again', from_name)
                                  ELSE format('from %s a segment may only move to %s', from_name, targets) END,
                             OLD.segment_id),
            HINT = 'The allowed transitions are in rlmm_segment_transitions (statemachine.go); see README, "Repairing by hand".';
    END IF;

    -- The library's statement stamps the segment with the partition's next
    -- version (last_version) itself. A write that does not, a manual
    -- UPDATE, gets the same bookkeeping here: the partition's version is
    -- bumped (which also locks the partition row, as the library does
    -- first), the segment stamped with it, and a notification sent at commit,
    -- so that CaughtUp and the managers' caches see the repair.
    IF NEW.last_version IS NOT DISTINCT FROM OLD.last_version THEN
        EXECUTE format('UPDATE %I.rlmm_partitions SET version = version + 1, updated_at = now()
                        WHERE topic_id = $1 AND partition = $2 RETURNING version, delete_state',
                       TG_TABLE_SCHEMA)
            INTO version, delete_state USING NEW.topic_id, NEW.partition;
        IF delete_state = 2 THEN
            RAISE EXCEPTION USING
                ERRCODE = 'check_violation',
                CONSTRAINT = 'rlmm_segments_state_transition',
                MESSAGE = format('segment %s (topic %s, partition %s): the partition''s delete finished (DELETE_PARTITION_FINISHED), so the segment is forgotten and its state can no longer change',
                                 OLD.segment_id, OLD.topic, OLD.partition);
        END IF;
        NEW.last_version := version;
        IF NEW.state = 1 THEN
            NEW.finished_version := coalesce(NEW.finished_version, version);
        END IF;
        NEW.updated_at := now();
        -- The epoch rows copy the segment's state (lookups read them). The
        -- library's own statement never reaches this trigger, so no other
        -- part of this statement updates them.
        EXECUTE format('UPDATE %I.rlmm_segment_epochs SET state = $4, finished_version = $5, last_version = $6
                        WHERE topic_id = $1 AND partition = $2 AND segment_id = $3',
                       TG_TABLE_SCHEMA)
            USING NEW.topic_id, NEW.partition, NEW.segment_id, NEW.state, NEW.finished_version, version;
        -- 00004: COPY_SEGMENT_FINISHED raises the epoch ends, as the
        -- library's SegmentUpdate does.
        IF NEW.state = 1 THEN
            EXECUTE format('INSERT INTO %1$I.rlmm_epoch_ends AS ee (topic_id, partition, epoch, end_offset, max_segment_span, raised_version)
                            SELECT e.topic_id, e.partition, e.epoch, e.last_offset, e.segment_end_offset - e.segment_start_offset, $4
                            FROM %1$I.rlmm_segment_epochs e
                            WHERE e.topic_id = $1 AND e.partition = $2 AND e.segment_id = $3
                            ON CONFLICT (topic_id, partition, epoch) DO UPDATE
                            SET end_offset = greatest(ee.end_offset, excluded.end_offset),
                                max_segment_span = greatest(ee.max_segment_span, excluded.max_segment_span),
                                raised_version = excluded.raised_version
                            WHERE excluded.end_offset > ee.end_offset OR excluded.max_segment_span > ee.max_segment_span',
                           TG_TABLE_SCHEMA)
                USING NEW.topic_id, NEW.partition, NEW.segment_id, version;
        END IF;
        PERFORM pg_notify('rlmm_changes', NEW.topic_id::text || '/' || NEW.partition || '/' || version);
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION rlmm_segments_state_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    allowed      boolean;
    from_name    text;
    to_name      text;
    targets      text;
    version      bigint;
    delete_state smallint;
BEGIN
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I.rlmm_segment_transitions WHERE from_state = $1 AND to_state = $2)',
                   TG_TABLE_SCHEMA)
        INTO allowed USING OLD.state, NEW.state;
    IF NOT allowed THEN
        EXECUTE format('SELECT (SELECT name FROM %1$I.rlmm_segment_states WHERE state = $1),
                               (SELECT name FROM %1$I.rlmm_segment_states WHERE state = $2),
                               (SELECT string_agg(st.name, '' or '' ORDER BY st.state)
                                FROM %1$I.rlmm_segment_transitions t
                                JOIN %1$I.rlmm_segment_states st ON st.state = t.to_state
                                WHERE t.from_state = $1 AND t.to_state <> $1)',
                       TG_TABLE_SCHEMA)
            INTO from_name, to_name, targets USING OLD.state, NEW.state;
        RAISE EXCEPTION USING
            ERRCODE = 'check_violation',
            CONSTRAINT = 'rlmm_segments_state_transition',
            MESSAGE = format('segment %s (topic %s, partition %s): %s -> %s is not an allowed transition; %s. Repair through the library: rlmmctl segments set-state %s <STATE>',
                             OLD.segment_id, OLD.topic, OLD.partition,
                             coalesce(from_name, 'state ' || OLD.state), coalesce(to_name, 'unknown state ' || NEW.state),
                             CASE WHEN targets IS NULL THEN format('a segment in %s never changes state again', from_name)
                                  ELSE format('from %s a segment may only move to %s', from_name, targets) END,
                             OLD.segment_id),
            HINT = 'The allowed transitions are in rlmm_segment_transitions (statemachine.go); see README, "Repairing by hand".';
    END IF;

    -- The library's statement stamps the segment with the partition's next
    -- version (last_version) itself. A write that does not, a manual
    -- UPDATE, gets the same bookkeeping here: the partition's version is
    -- bumped (which also locks the partition row, as the library does
    -- first), the segment stamped with it, and a notification sent at commit,
    -- so that CaughtUp and the managers' caches see the repair.
    IF NEW.last_version IS NOT DISTINCT FROM OLD.last_version THEN
        EXECUTE format('UPDATE %I.rlmm_partitions SET version = version + 1, updated_at = now()
                        WHERE topic_id = $1 AND partition = $2 RETURNING version, delete_state',
                       TG_TABLE_SCHEMA)
            INTO version, delete_state USING NEW.topic_id, NEW.partition;
        IF delete_state = 2 THEN
            RAISE EXCEPTION USING
                ERRCODE = 'check_violation',
                CONSTRAINT = 'rlmm_segments_state_transition',
                MESSAGE = format('segment %s (topic %s, partition %s): the partition''s delete finished (DELETE_PARTITION_FINISHED), so the segment is forgotten and its state can no longer change',
                                 OLD.segment_id, OLD.topic, OLD.partition);
        END IF;
        NEW.last_version := version;
        IF NEW.state = 1 THEN
            NEW.finished_version := coalesce(NEW.finished_version, version);
        END IF;
        NEW.updated_at := now();
        -- The epoch rows copy the segment's state (lookups read them). The
        -- library's own statement never reaches this trigger, so no other
        -- part of this statement updates them.
        EXECUTE format('UPDATE %I.rlmm_segment_epochs SET state = $4, finished_version = $5, last_version = $6
                        WHERE topic_id = $1 AND partition = $2 AND segment_id = $3',
                       TG_TABLE_SCHEMA)
            USING NEW.topic_id, NEW.partition, NEW.segment_id, NEW.state, NEW.finished_version, version;
        PERFORM pg_notify('rlmm_changes', NEW.topic_id::text || '/' || NEW.partition || '/' || version);
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
DROP TABLE rlmm_epoch_ends;
