package remotestorage_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
)

// Migration 00007 keeps the rules of every row in one CHECK per table, a
// function of the row: a DBA's write that breaks one is refused with the
// rule's name (the name its own constraint had before) and the values that
// broke it. Each rule is broken once here, by a plain UPDATE of a row the
// library wrote.
func TestRowRulesNameTheBrokenRule(t *testing.T) {
	t.Parallel()
	f := newGuardFixture(t)
	cases := []struct {
		rule, table, set string
		mentions         []string
	}{
		{"rlmm_partitions_partition_check", "rlmm_partitions", "partition = -1", []string{"partition -1 is negative"}},
		{"rlmm_partitions_topic_check", "rlmm_partitions", "topic = 'a b'", []string{"'a b'", "not a Kafka topic name"}},
		{"rlmm_partitions_topic_check", "rlmm_partitions", "topic = '..'", []string{"'..'"}},
		{"rlmm_partitions_version_check", "rlmm_partitions", "version = -1", []string{"version -1"}},
		{"rlmm_partitions_max_epoch_span_check", "rlmm_partitions", "max_epoch_span = -5", []string{"max_epoch_span -5"}},
		{"rlmm_partitions_delete_fields_check", "rlmm_partitions", "delete_broker_id = 1", []string{"all NULL or all set"}},
		{"rlmm_segments_offsets_check", "rlmm_segments", "end_offset = -1", []string{"start_offset 0 and end_offset -1"}},
		{"rlmm_segments_size_check", "rlmm_segments", "segment_size_bytes = -1", []string{"segment_size_bytes -1"}},
		{"rlmm_segments_versions_check", "rlmm_segments", "added_version = last_version + 1", []string{"added_version"}},
		{"rlmm_segments_versions_check", "rlmm_segments", "finished_version = NULL", []string{"finished_version NULL"}},
		{"rlmm_segments_epochs_check", "rlmm_segments", "epochs = '{}'", []string{"epochs {}"}},
		{"rlmm_segments_epochs_check", "rlmm_segments", "epoch_start_offsets = '{0}'", []string{"epoch_start_offsets {0}"}},
		{"rlmm_segments_epochs_check", "rlmm_segments", "epoch_start_offsets = '{0, 200}'", []string{"inside [0, 99]"}},
		{"rlmm_segment_epochs_epoch_check", "rlmm_segment_epochs", "epoch = -1", []string{"epoch -1 is negative"}},
		{"rlmm_segment_epochs_range_check", "rlmm_segment_epochs", "last_offset = 500", []string{"last_offset 500"}},
		{"rlmm_segment_epochs_finished_check", "rlmm_segment_epochs", "finished_version = NULL", []string{"finished_version must be set"}},
		{"rlmm_epoch_ends_epoch_check", "rlmm_epoch_ends", "epoch = -1", []string{"epoch -1 is negative"}},
		{"rlmm_epoch_ends_end_offset_check", "rlmm_epoch_ends", "end_offset = -1", []string{"end_offset -1"}},
		{"rlmm_epoch_ends_max_segment_span_check", "rlmm_epoch_ends", "max_segment_span = -1", []string{"max_segment_span -1"}},
	}
	for _, c := range cases {
		t.Run(c.rule+"/"+c.set, func(t *testing.T) {
			id := f.addSegmentIn(t, rs.CopySegmentFinished)
			where := "topic_id = $1 AND partition = $2"
			if c.table == "rlmm_segments" || c.table == "rlmm_segment_epochs" {
				where += " AND segment_id = $3"
			}
			tag, err := f.pool.Exec(t.Context(), fmt.Sprintf("UPDATE %s SET %s WHERE %s AND $3::uuid IS NOT NULL", c.table, c.set, where),
				id.TopicIDPartition.TopicID, id.TopicIDPartition.Partition, id.ID)
			requireGuardError(t, err, c.rule, c.mentions...)
			require.Zero(t, tag.RowsAffected())
		})
	}
	// The state rules: an UPDATE to an unknown state is refused by the
	// transition guards first (TestGuardStatesAreValidated); a row inserted
	// by hand meets the rule itself.
	_, err := f.pool.Exec(t.Context(), `
		INSERT INTO rlmm_partitions (topic_id, partition, topic, delete_state, delete_broker_id, delete_event_timestamp_ms)
		VALUES (gen_random_uuid(), 0, 'orders', 9, 1, 1)`)
	requireGuardError(t, err, "rlmm_partitions_delete_state_check", "delete_state 9")
	_, err = f.pool.Exec(t.Context(), `
		INSERT INTO rlmm_segment_epochs (topic_id, partition, segment_id, epoch, first_offset, last_offset, state,
		    segment_start_offset, segment_end_offset, added_version, last_version)
		VALUES (gen_random_uuid(), 0, gen_random_uuid(), 0, 0, 9, 7, 0, 9, 1, 1)`)
	requireGuardError(t, err, "rlmm_segment_epochs_state_check", "state 7")
}

// What the foreign key from the epoch rows to their segment did for DBAs,
// the triggers of 00007 still do: a deleted segment takes its epoch rows
// with it, and TRUNCATE of the segments truncates them.
func TestDeletedSegmentTakesItsEpochRows(t *testing.T) {
	t.Parallel()
	f := newGuardFixture(t)
	gone, kept := f.addSegmentIn(t, rs.CopySegmentFinished), f.addSegmentIn(t, rs.CopySegmentStarted)
	epochRows := func(id rs.RemoteLogSegmentID) (n int) {
		require.NoError(t, f.pool.QueryRow(t.Context(), "SELECT count(*) FROM rlmm_segment_epochs WHERE segment_id = $1", id.ID).Scan(&n))
		return n
	}
	require.Equal(t, 2, epochRows(gone))
	_, err := f.pool.Exec(t.Context(), "DELETE FROM rlmm_segments WHERE segment_id = $1", gone.ID)
	require.NoError(t, err)
	require.Zero(t, epochRows(gone))
	require.Equal(t, 2, epochRows(kept))

	_, err = f.pool.Exec(t.Context(), "TRUNCATE rlmm_segments")
	require.NoError(t, err)
	require.Zero(t, epochRows(kept))
}

// Every foreign key is checked, on each write of a referencing row, by a
// query PostgreSQL plans once per connection: "SELECT 1 FROM ONLY <table> x
// WHERE <key columns> = $n FOR KEY SHARE OF x". Its plan must not depend on
// statistics either: on tables never analyzed, empty (a connection's first
// write on a new cluster plans it then and keeps the plan) and full, with
// custom and generic plans, it reads the referenced key's own index with
// every key column as an index condition, and filters nothing. (Schema 6's
// rlmm_segment_epochs_segment_fkey failed this: rlmm_segments_changes_idx on
// (topic_id, partition), filtered on segment_id, the whole partition read
// on every add.)
func TestForeignKeyChecksReadTheKey(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.NewPool(t)
	_, err := pool.Exec(ctx, `
ALTER TABLE rlmm_partitions SET (autovacuum_enabled = false);
ALTER TABLE rlmm_segments SET (autovacuum_enabled = false);
ALTER TABLE rlmm_segment_epochs SET (autovacuum_enabled = false);
ALTER TABLE rlmm_epoch_ends SET (autovacuum_enabled = false);`)
	require.NoError(t, err)
	rows, err := pool.Query(ctx, `
		SELECT c.conname, c.confrelid::regclass::text, i.relname,
		       array(SELECT a.attname::text FROM unnest(c.confkey) WITH ORDINALITY k(attnum, n)
		             JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.attnum ORDER BY k.n),
		       array(SELECT format_type(a.atttypid, a.atttypmod) FROM unnest(c.confkey) WITH ORDINALITY k(attnum, n)
		             JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.attnum ORDER BY k.n)
		FROM pg_constraint c JOIN pg_class i ON i.oid = c.conindid
		WHERE c.contype = 'f' AND c.connamespace = current_schema()::regnamespace
		ORDER BY c.conname`)
	require.NoError(t, err)
	type fk struct {
		name, table, index string
		columns, types     []string
	}
	fks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (k fk, err error) {
		err = r.Scan(&k.name, &k.table, &k.index, &k.columns, &k.types)
		return k, err
	})
	require.NoError(t, err)
	require.NotEmpty(t, fks)

	check := func(t *testing.T, k fk) {
		conn, err := pool.Acquire(ctx)
		require.NoError(t, err)
		defer conn.Release()
		conds := make([]string, len(k.columns))
		args := make([]string, len(k.columns))
		for i, col := range k.columns {
			conds[i] = fmt.Sprintf("%s OPERATOR(pg_catalog.=) $%d", col, i+1)
			args[i] = "'1'::" + k.types[i]
			if k.types[i] == "uuid" {
				args[i] = "'00000000-0000-0000-0000-000000000001'::uuid"
			}
		}
		sql := fmt.Sprintf("SELECT 1 FROM ONLY %s x WHERE %s FOR KEY SHARE OF x", k.table, strings.Join(conds, " AND "))
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			_, err = conn.Exec(ctx, "SET plan_cache_mode = "+mode)
			require.NoError(t, err)
			_, err = conn.Exec(ctx, "PREPARE rlmm_fk AS "+sql)
			require.NoError(t, err, sql)
			var raw []byte
			require.NoError(t, conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) EXECUTE rlmm_fk("+strings.Join(args, ", ")+")").Scan(&raw))
			_, err = conn.Exec(ctx, "DEALLOCATE rlmm_fk")
			require.NoError(t, err)
			var plans []struct {
				Plan struct {
					Plans []map[string]any `json:"Plans"`
				} `json:"Plan"`
			}
			require.NoError(t, json.Unmarshal(raw, &plans))
			require.Len(t, plans[0].Plan.Plans, 1, "%s: %s", k.name, raw)
			scan := plans[0].Plan.Plans[0]
			require.Equalf(t, k.index, scan["Index Name"], "%s (%s): the check reads another index than the key's:\n%s", k.name, mode, raw)
			require.Nilf(t, scan["Filter"], "%s (%s): the check filters rows the index did not select:\n%s", k.name, mode, raw)
			for _, col := range k.columns {
				require.Containsf(t, scan["Index Cond"], col, "%s (%s): %s is not an index condition:\n%s", k.name, mode, col, raw)
			}
		}
	}
	for _, k := range fks {
		t.Run("empty/"+k.name, func(t *testing.T) { check(t, k) })
	}
	// The same on full tables that nothing has analyzed.
	m, err := rs.NewPgManager(ctx, pool)
	require.NoError(t, err)
	t.Cleanup(m.Close)
	tp := testTP(0)
	for i := range int64(300) {
		s := segment(tp, i*100, i*100+99, map[rs.LeaderEpoch]int64{0: i * 100})
		require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, s))
		require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, update(s, rs.CopySegmentFinished)))
	}
	for _, k := range fks {
		t.Run("full/"+k.name, func(t *testing.T) { check(t, k) })
	}
}
