-- +goose Up
-- rlmm:compatible-with 2
-- A purge that takes a deleted partition's record reloads that partition
-- alone in the caches, not every partition of every cache.
--
-- The purge (queries/purge.sql, PurgeDeletedPartitions) takes the delete
-- record of a partition whose deletion finished and deletes its epoch ends
-- in the same statement. Migration 00010 made every DELETE of epoch ends
-- bump rlmm_data_generation, so each such purge made every cache on every
-- broker reload every partition it held.
--
-- Now the epoch ends of a partition that the deleting statement purged
-- (purged_version = version: the purge stamps both, and any later write
-- moves version on) mark that partition instead: vanished_version takes its
-- version, and a cache behind that version reloads it alone, as after a
-- DELETE of segment rows. Such a partition holds no other epoch ends, since
-- only a write raises them. Any other DELETE of epoch ends (a DBA's) still
-- bumps the generation.
--
-- Expand-only: a trigger function replaced. The purge statement is the same
-- in code of every schema, so code of schema 2 and later runs on it.

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION rlmm_data_generation_bump() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    generation bigint;
    others boolean;
BEGIN
    IF TG_OP = 'DELETE' THEN
        -- A statement trigger fires for a DELETE that found no row too (a
        -- purge's, say): only one that deleted rows moves the generation.
        IF NOT EXISTS (SELECT FROM rlmm_deleted_rows) THEN
            RETURN NULL;
        END IF;
        IF TG_TABLE_NAME = 'rlmm_epoch_ends' THEN
            EXECUTE format($sql$
                WITH purged AS (
                    UPDATE %1$I.rlmm_partitions p
                    SET vanished_version = p.version
                    FROM (SELECT DISTINCT d.topic_id, d.partition FROM rlmm_deleted_rows d) d
                    WHERE p.topic_id = d.topic_id AND p.partition = d.partition
                      AND p.purged_version = p.version
                    RETURNING p.topic_id, p.partition
                )
                SELECT EXISTS (SELECT FROM rlmm_deleted_rows d
                               WHERE NOT EXISTS (SELECT FROM purged g
                                                 WHERE g.topic_id = d.topic_id AND g.partition = d.partition))
            $sql$, TG_TABLE_SCHEMA) INTO others;
            IF NOT others THEN
                RETURN NULL;
            END IF;
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
COMMENT ON FUNCTION rlmm_data_generation_bump() IS 'Trigger: a TRUNCATE of a metadata table, or a DELETE that removed partition rows or epoch ends, bumps rlmm_data_generation and notifies it, so that caches reload; epoch ends deleted by the purge of their partition (purged_version = version) mark that partition (vanished_version) instead.';

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION rlmm_data_generation_bump() RETURNS trigger
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
