package rstest

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
)

// LoadEpoch stores n finished segments of 90 offsets with gaps of 10 in one
// partition, all carrying epoch 3 (the first also epoch 2, the last also
// epoch 4), segment i with MaxTimestampMs 1000*i. Autovacuum is off on
// the tables, so they stay never analyzed until a test analyzes them.
func LoadEpoch(t testing.TB, pool *pgxpool.Pool, tp rs.TopicIDPartition, n int) {
	t.Helper()
	load(t, pool, tp, n, `CASE WHEN i = 0 THEN ARRAY[2, 3] WHEN i = $4::integer - 1 THEN ARRAY[3, 4] ELSE ARRAY[3] END`,
		`CASE WHEN i = 0 OR i = $4 - 1 THEN ARRAY[i * 100, i * 100 + 40]::bigint[] ELSE ARRAY[i * 100]::bigint[] END`)
}

// LoadSpanning stores, as LoadEpoch, n finished segments in one partition,
// each spanning two leader epochs (segment i epochs i and i+1, the second
// from offset 40 of the segment): as many epoch rows as a partition whose
// leader changed within every segment, so that a plan reading the epoch
// rows by scanning their table would show.
func LoadSpanning(t testing.TB, pool *pgxpool.Pool, tp rs.TopicIDPartition, n int) {
	t.Helper()
	load(t, pool, tp, n, `ARRAY[i, i + 1]`, `ARRAY[i * 100, i * 100 + 40]::bigint[]`)
}

// load stores n finished segments of tp whose epochs and their start
// offsets are the SQL expressions epochs and starts of i (and $4, n).
func load(t testing.TB, pool *pgxpool.Pool, tp rs.TopicIDPartition, n int, epochs, starts string) {
	t.Helper()
	for _, st := range []struct {
		sql  string
		args []any
	}{
		{`ALTER TABLE rlmm_partitions SET (autovacuum_enabled = false)`, []any{}},
		{`ALTER TABLE rlmm_segments SET (autovacuum_enabled = false)`, []any{}},
		{`ALTER TABLE rlmm_segment_epochs SET (autovacuum_enabled = false)`, []any{}},
		{`ALTER TABLE rlmm_epoch_ends SET (autovacuum_enabled = false)`, []any{}},
		{`INSERT INTO rlmm_partitions (topic_id, partition, topic, max_segment_span)
VALUES ($1, $2, $3, 89)`, []any{tp.TopicID, tp.Partition, tp.Topic}},
		{`INSERT INTO rlmm_segments (topic_id, partition, segment_id, topic, start_offset, end_offset, max_timestamp_ms,
    broker_id, event_timestamp_ms, segment_size_bytes, state, txn_index_empty, epochs, epoch_start_offsets,
    added_version, finished_version, last_version, last_xid)
SELECT $1::uuid, $2::integer, md5($1::uuid::text || $2::integer || '/' || i)::uuid, $3::text, i * 100, i * 100 + 89, i * 1000, 1, 0, 1000, 1, true,
    ` + epochs + `,
    ` + starts + `,
    2 * i + 1, 2 * i + 2, 2 * i + 2, pg_current_xact_id()
FROM generate_series(0, $4::integer - 1) i`, []any{tp.TopicID, tp.Partition, tp.Topic, n}},
		{`INSERT INTO rlmm_segment_epochs (topic_id, partition, segment_id, epoch, first_offset, last_offset, state,
    segment_start_offset, segment_end_offset, added_version, finished_version, last_version, segment_size_bytes, max_timestamp_ms)
SELECT s.topic_id, s.partition, s.segment_id, s.epochs[k], s.epoch_start_offsets[k],
    coalesce(s.epoch_start_offsets[k + 1] - 1, s.end_offset), s.state, s.start_offset, s.end_offset,
    s.added_version, s.finished_version, s.last_version, s.segment_size_bytes, s.max_timestamp_ms
FROM rlmm_segments s, generate_subscripts(s.epochs, 1) k
WHERE s.topic_id = $1 AND s.partition = $2 AND cardinality(s.epochs) > 1`, []any{tp.TopicID, tp.Partition}},
		// The library's writes that follow take write orders above these.
		{`SELECT setval('rlmm_versions', greatest(nextval('rlmm_versions'), 2 * $1::bigint + 2))`, []any{n}},
	} {
		_, err := pool.Exec(t.Context(), st.sql, st.args...)
		require.NoError(t, err, st.sql)
	}
}
