-- +goose Up
-- rlmm:compatible-with 2
-- Every write bumps its partition's row (version, updated_at). 00005 indexed
-- rlmm_partitions.updated_at for the stuck view, and an UPDATE that changes
-- an indexed column cannot be HOT: each write then added an entry to every
-- index of the table (the primary key that each lookup probes included) and
-- left a dead row version on another page, two per segment added and
-- finished. The stuck view needs only the few partitions with a delete in
-- flight: index them by delete_state, which a write does not change, and
-- leave room on each page for the updated versions of its rows.
-- Expand-only: code of schema 2 and later sends the same statements.
DROP INDEX rlmm_partitions_deleting_idx;
CREATE INDEX rlmm_partitions_deleting_idx ON rlmm_partitions (delete_state)
    WHERE delete_state IN (0, 1);
ALTER TABLE rlmm_partitions SET (fillfactor = 50);

-- +goose Down
ALTER TABLE rlmm_partitions RESET (fillfactor);
DROP INDEX rlmm_partitions_deleting_idx;
CREATE INDEX rlmm_partitions_deleting_idx ON rlmm_partitions (updated_at)
    WHERE delete_state IN (0, 1);
