-- +goose Up
-- rlmm:compatible-with 2
-- The repairs docs/DBA.md describes keep the brokers' caches honest, and
-- its views work for every legal segment.
-- Expand-only: a column with a constant default (no table rewrite), a
-- one-row table, triggers on statements the library never runs (DELETE,
-- TRUNCATE), and two views replaced with the same columns. Code of schema 2
-- and later runs on it.
--
-- A cache catches up by the change feed: the segments whose last_version is
-- past its version. A row that is deleted leaves nothing in that feed, and
-- a TRUNCATE resets every version. So:
-- 1. A DELETE of segment rows marks their partitions (vanished_version): a
--    segment that was live bumps the version (caches that hold it are
--    behind, CaughtUp says false, the notification goes out) and sets
--    vanished_version to it; a forgotten one (what rlmmctl purge
--    --drop-ids deletes) raises vanished_version to the segment's last
--    version, since only a cache older than that can still hold it. A
--    cache whose version is below vanished_version reloads the partition.
-- 2. A TRUNCATE of a metadata table, and a DELETE of partition rows or of
--    epoch ends, bumps rlmm_data_generation, which survives them: a cache
--    loaded at another generation reloads.
-- 3. rlmm_segments_v.offset_count and rlmm_segment_epochs_v.offset_count
--    are NULL for the one range whose count, 2^63, a bigint cannot hold
--    (0 to 9223372036854775807) instead of failing the whole query.
--
-- Tables are locked in the writers' order: rlmm_partitions, then
-- rlmm_segments.

ALTER TABLE rlmm_partitions ADD COLUMN vanished_version bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN rlmm_partitions.vanished_version IS 'Largest version at which segment rows of the partition were deleted (a DBA''s DELETE, rlmmctl purge --drop-ids): a cache older than it cannot catch up by the change feed and reloads the partition. 0: none.';

CREATE TABLE rlmm_data_generation (
    id          smallint    NOT NULL DEFAULT 1,
    generation  bigint      NOT NULL,
    changed_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT rlmm_data_generation_pkey PRIMARY KEY (id),
    CONSTRAINT rlmm_data_generation_one_row CHECK (id = 1)
);
INSERT INTO rlmm_data_generation (generation) VALUES (1);
COMMENT ON TABLE rlmm_data_generation IS 'One row: the generation of the metadata, bumped by every TRUNCATE of rlmm_partitions, rlmm_segments or rlmm_epoch_ends and every DELETE of partition rows or epoch ends (versions restart or move back, which the change feed cannot tell). A cache loaded at another generation reloads.';
COMMENT ON COLUMN rlmm_data_generation.id IS 'Always 1: the table has one row.';
COMMENT ON COLUMN rlmm_data_generation.generation IS 'Bumped by each TRUNCATE or DELETE that a cache must reload after.';
COMMENT ON COLUMN rlmm_data_generation.changed_at IS 'When the generation was last bumped.';

-- +goose StatementBegin
CREATE FUNCTION rlmm_segments_vanished() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- The partitions' rows are locked in key order; a live segment's
    -- partition gets a new version, which the notification announces.
    EXECUTE format($sql$
        WITH gone AS (
            SELECT v.topic_id, v.partition, max(v.last_version) AS last_version, bool_or(v.state <> 3) AS any_live
            FROM rlmm_vanished_segments v
            GROUP BY v.topic_id, v.partition
        ), locked AS (
            SELECT p.topic_id, p.partition, g.last_version, (g.any_live AND p.delete_state IS DISTINCT FROM 2) AS live
            FROM %1$I.rlmm_partitions p
            JOIN gone g ON g.topic_id = p.topic_id AND g.partition = p.partition
            ORDER BY p.topic_id, p.partition
            FOR NO KEY UPDATE OF p
        ), marked AS (
            UPDATE %1$I.rlmm_partitions p
            SET version = CASE WHEN l.live THEN p.version + 1 ELSE p.version END,
                vanished_version = CASE WHEN l.live THEN p.version + 1
                                        ELSE greatest(p.vanished_version, l.last_version) END,
                updated_at = CASE WHEN l.live THEN now() ELSE p.updated_at END
            FROM locked l
            WHERE p.topic_id = l.topic_id AND p.partition = l.partition
            RETURNING p.topic_id, p.partition, p.version, l.live
        )
        SELECT pg_notify('rlmm_changes', m.topic_id::text || '/' || m.partition || '/' || m.version)
        FROM marked m
        WHERE m.live
    $sql$, TG_TABLE_SCHEMA);
    RETURN NULL;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION rlmm_segments_vanished() IS 'Trigger rlmm_segments_vanished: a DELETE of segment rows marks their partitions (rlmm_partitions.vanished_version; a live segment also bumps the version and notifies), so that caches reload them.';
CREATE TRIGGER rlmm_segments_vanished
    AFTER DELETE ON rlmm_segments
    REFERENCING OLD TABLE AS rlmm_vanished_segments
    FOR EACH STATEMENT EXECUTE FUNCTION rlmm_segments_vanished();

-- +goose StatementBegin
CREATE FUNCTION rlmm_data_generation_bump() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    generation bigint;
BEGIN
    IF TG_OP = 'DELETE' THEN
        -- A statement trigger fires for a DELETE that found no row too (a
        -- purge's, say): only one that deleted rows moves the generation.
        IF NOT EXISTS (SELECT FROM rlmm_deleted_rows) THEN
            RETURN NULL;
        END IF;
    END IF;
    EXECUTE format('INSERT INTO %I.rlmm_data_generation AS g (id, generation) VALUES (1, 1)
                    ON CONFLICT (id) DO UPDATE SET generation = g.generation + 1, changed_at = now()
                    RETURNING g.generation', TG_TABLE_SCHEMA)
        INTO generation;
    PERFORM pg_notify('rlmm_changes', 'reset/' || generation);
    RETURN NULL;
END
$$;
-- +goose StatementEnd
COMMENT ON FUNCTION rlmm_data_generation_bump() IS 'Trigger: a TRUNCATE of a metadata table, or a DELETE that removed partition rows or epoch ends, bumps rlmm_data_generation and notifies it, so that caches reload.';
CREATE TRIGGER rlmm_partitions_truncated
    AFTER TRUNCATE ON rlmm_partitions
    FOR EACH STATEMENT EXECUTE FUNCTION rlmm_data_generation_bump();
CREATE TRIGGER rlmm_partitions_deleted
    AFTER DELETE ON rlmm_partitions
    REFERENCING OLD TABLE AS rlmm_deleted_rows
    FOR EACH STATEMENT EXECUTE FUNCTION rlmm_data_generation_bump();
CREATE TRIGGER rlmm_segments_truncated
    AFTER TRUNCATE ON rlmm_segments
    FOR EACH STATEMENT EXECUTE FUNCTION rlmm_data_generation_bump();
CREATE TRIGGER rlmm_epoch_ends_truncated
    AFTER TRUNCATE ON rlmm_epoch_ends
    FOR EACH STATEMENT EXECUTE FUNCTION rlmm_data_generation_bump();
CREATE TRIGGER rlmm_epoch_ends_deleted
    AFTER DELETE ON rlmm_epoch_ends
    REFERENCING OLD TABLE AS rlmm_deleted_rows
    FOR EACH STATEMENT EXECUTE FUNCTION rlmm_data_generation_bump();

CREATE OR REPLACE VIEW rlmm_segments_v AS
SELECT p.topic,
       s.partition,
       s.segment_id,
       st.name AS state,
       (s.state = 3 OR p.delete_state IS NOT DISTINCT FROM 2) AS forgotten,
       s.start_offset,
       s.end_offset,
       (CASE WHEN s.end_offset - s.start_offset < 9223372036854775807
             THEN s.end_offset - s.start_offset + 1 END)::bigint AS offset_count,
       (SELECT string_agg(u.epoch || ':' || u.start_offset, ', ' ORDER BY u.epoch)
        FROM unnest(s.epochs, s.epoch_start_offsets) AS u (epoch, start_offset))::text AS epochs,
       pg_size_pretty(s.segment_size_bytes::bigint) AS size,
       s.segment_size_bytes AS size_bytes,
       s.broker_id,
       to_timestamp(s.event_timestamp_ms / 1000.0)::timestamptz AS event_time,
       to_timestamp(s.max_timestamp_ms / 1000.0)::timestamptz AS max_timestamp,
       s.txn_index_empty,
       coalesce(octet_length(s.custom_metadata), 0) AS custom_metadata_bytes,
       pds.name AS partition_delete_state,
       s.created_at,
       s.updated_at,
       s.topic_id,
       s.state AS state_code
FROM rlmm_segments s
JOIN rlmm_partitions p ON p.topic_id = s.topic_id AND p.partition = s.partition
JOIN rlmm_segment_states st ON st.state = s.state
JOIN rlmm_partition_delete_states pds ON pds.state = coalesce(p.delete_state, -1);
COMMENT ON COLUMN rlmm_segments_v.offset_count IS 'Number of offsets the segment spans: end_offset - start_offset + 1; NULL for a segment of every offset 0 to 9223372036854775807, whose count (2^63) a bigint cannot hold.';

CREATE OR REPLACE VIEW rlmm_segment_epochs_v AS
SELECT p.topic,
       e.partition,
       e.epoch,
       e.first_offset,
       e.last_offset,
       (CASE WHEN e.last_offset - e.first_offset < 9223372036854775807
             THEN e.last_offset - e.first_offset + 1 END)::bigint AS offset_count,
       e.segment_id,
       st.name AS state,
       (e.state = 1 AND p.delete_state IS DISTINCT FROM 2) AS answers_lookups,
       e.segment_start_offset,
       e.segment_end_offset,
       e.finished_version,
       e.topic_id
FROM rlmm_segment_epochs e
JOIN rlmm_partitions p ON p.topic_id = e.topic_id AND p.partition = e.partition
JOIN rlmm_segment_states st ON st.state = e.state;
COMMENT ON COLUMN rlmm_segment_epochs_v.offset_count IS 'Number of offsets of the epoch inside the segment; NULL for a range of every offset 0 to 9223372036854775807, whose count (2^63) a bigint cannot hold.';

-- +goose Down
-- rlmm_partitions first, as in the writers' order.
DROP TRIGGER rlmm_partitions_deleted ON rlmm_partitions;
DROP TRIGGER rlmm_partitions_truncated ON rlmm_partitions;
ALTER TABLE rlmm_partitions DROP COLUMN vanished_version;
DROP TRIGGER rlmm_segments_truncated ON rlmm_segments;
DROP TRIGGER rlmm_segments_vanished ON rlmm_segments;
DROP TRIGGER rlmm_epoch_ends_deleted ON rlmm_epoch_ends;
DROP TRIGGER rlmm_epoch_ends_truncated ON rlmm_epoch_ends;
DROP FUNCTION rlmm_data_generation_bump();
DROP FUNCTION rlmm_segments_vanished();
DROP TABLE rlmm_data_generation;
CREATE OR REPLACE VIEW rlmm_segment_epochs_v AS
SELECT p.topic,
       e.partition,
       e.epoch,
       e.first_offset,
       e.last_offset,
       (e.last_offset - e.first_offset + 1)::bigint AS offset_count,
       e.segment_id,
       st.name AS state,
       (e.state = 1 AND p.delete_state IS DISTINCT FROM 2) AS answers_lookups,
       e.segment_start_offset,
       e.segment_end_offset,
       e.finished_version,
       e.topic_id
FROM rlmm_segment_epochs e
JOIN rlmm_partitions p ON p.topic_id = e.topic_id AND p.partition = e.partition
JOIN rlmm_segment_states st ON st.state = e.state;
COMMENT ON COLUMN rlmm_segment_epochs_v.offset_count IS 'Number of offsets of the epoch inside the segment.';
CREATE OR REPLACE VIEW rlmm_segments_v AS
SELECT p.topic,
       s.partition,
       s.segment_id,
       st.name AS state,
       (s.state = 3 OR p.delete_state IS NOT DISTINCT FROM 2) AS forgotten,
       s.start_offset,
       s.end_offset,
       (s.end_offset - s.start_offset + 1)::bigint AS offset_count,
       (SELECT string_agg(u.epoch || ':' || u.start_offset, ', ' ORDER BY u.epoch)
        FROM unnest(s.epochs, s.epoch_start_offsets) AS u (epoch, start_offset))::text AS epochs,
       pg_size_pretty(s.segment_size_bytes::bigint) AS size,
       s.segment_size_bytes AS size_bytes,
       s.broker_id,
       to_timestamp(s.event_timestamp_ms / 1000.0)::timestamptz AS event_time,
       to_timestamp(s.max_timestamp_ms / 1000.0)::timestamptz AS max_timestamp,
       s.txn_index_empty,
       coalesce(octet_length(s.custom_metadata), 0) AS custom_metadata_bytes,
       pds.name AS partition_delete_state,
       s.created_at,
       s.updated_at,
       s.topic_id,
       s.state AS state_code
FROM rlmm_segments s
JOIN rlmm_partitions p ON p.topic_id = s.topic_id AND p.partition = s.partition
JOIN rlmm_segment_states st ON st.state = s.state
JOIN rlmm_partition_delete_states pds ON pds.state = coalesce(p.delete_state, -1);
COMMENT ON COLUMN rlmm_segments_v.offset_count IS 'Number of offsets the segment spans: end_offset - start_offset + 1.';
