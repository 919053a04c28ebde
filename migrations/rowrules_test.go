package migrations_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/plancheck"
	"github.com/krabka/remotestorage/internal/rstest"
)

// Every rule of a row is a CHECK constraint, of its table or of a column's
// domain: a DBA's write that breaks one is refused with SQLSTATE 23514 and
// the constraint's name (PgError.ConstraintName). Each rule is broken here, alone, by a plain
// UPDATE of a row the library wrote (an UPDATE of a state stamps a new
// version, so that the state guard lets it through to the rule), and once
// by an INSERT; every CHECK constraint of the data tables has a case.
func TestRowRulesNameTheBrokenRule(t *testing.T) {
	t.Parallel()
	f := newGuardFixture(t)
	cases := []struct {
		rule, table, set string
	}{
		{"rlmm_partition_number_check", "rlmm_partitions", "partition = -1"},
		{"rlmm_topic_name_check", "rlmm_partitions", "topic = 'a b'"},
		{"rlmm_topic_name_check", "rlmm_partitions", "topic = '..'"},
		{"rlmm_topic_name_check", "rlmm_partitions", "topic = ''"},
		{"rlmm_topic_name_check", "rlmm_partitions", "topic = repeat('a', 250)"},
		{"rlmm_count_check", "rlmm_partitions", "delete_version = -1"},
		{"rlmm_count_check", "rlmm_partitions", "max_segment_span = -1"},
		{"rlmm_delete_state_check", "rlmm_partitions",
			"delete_state = 9, delete_broker_id = 1, delete_event_timestamp_ms = 1, delete_version = delete_version + 1"},
		{"rlmm_partitions_delete_fields_check", "rlmm_partitions", "delete_broker_id = 1"},
		{"rlmm_partitions_delete_fields_check", "rlmm_partitions",
			"delete_state = 0, delete_broker_id = 1, delete_version = delete_version + 1"},
		{"rlmm_segment_state_check", "rlmm_segments", "state = 7, last_version = last_version + 1"},
		{"rlmm_offset_check", "rlmm_segments", "start_offset = -1"},
		// Epochs whose starts lie in the segment only because they are
		// out of order: the end before the start is what is wrong.
		{"rlmm_segments_offsets_check", "rlmm_segments", "start_offset = 40, end_offset = 20, epochs = '{0, 1}', epoch_start_offsets = '{50, 10}'"},
		{"rlmm_size_check", "rlmm_segments", "segment_size_bytes = -1"},
		{"rlmm_segments_versions_check", "rlmm_segments", "added_version = last_version + 1"},
		{"rlmm_segments_versions_check", "rlmm_segments", "finished_version = last_version + 1"},
		{"rlmm_segments_versions_check", "rlmm_segments", "finished_version = NULL"},
		{"rlmm_segments_epochs_check", "rlmm_segments", "epochs = '{}'"},
		{"rlmm_segments_epochs_check", "rlmm_segments", "epoch_start_offsets = '{0}'"},
		{"rlmm_segments_epochs_check", "rlmm_segments", "epoch_start_offsets = '{-5, 20}'"},
		{"rlmm_segments_epochs_check", "rlmm_segments", "epoch_start_offsets = '{0, 200}'"},
		{"rlmm_epoch_check", "rlmm_segment_epochs", "epoch = -1"},
		{"rlmm_segment_state_check", "rlmm_segment_epochs", "state = 7, last_version = last_version + 1"},
		{"rlmm_segment_epochs_state_check", "rlmm_segment_epochs", "finished_version = NULL"},
		{"rlmm_segment_epochs_range_check", "rlmm_segment_epochs", "last_offset = 500"},
		{"rlmm_segment_epochs_range_check", "rlmm_segment_epochs", "first_offset = last_offset + 1"},
		{"rlmm_segment_epochs_range_check", "rlmm_segment_epochs", "segment_start_offset = 1"},
		{"rlmm_epoch_check", "rlmm_epoch_ends", "epoch = -1"},
		{"rlmm_offset_check", "rlmm_epoch_ends", "end_offset = -1"},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.rule] = true
		t.Run(c.rule+"/"+c.set, func(t *testing.T) {
			id := f.addSegmentIn(t, rs.CopySegmentFinished)
			if c.table == "rlmm_epoch_ends" { // the end of a purged segment, as rlmm_purge_round keeps it
				_, err := f.pool.Exec(t.Context(), "INSERT INTO rlmm_epoch_ends (topic_id, partition, epoch, end_offset) VALUES ($1, $2, 0, 99)",
					id.TopicIDPartition.TopicID, id.TopicIDPartition.Partition)
				require.NoError(t, err)
			}
			where := "topic_id = $1 AND partition = $2"
			if c.table == "rlmm_segments" || c.table == "rlmm_segment_epochs" {
				where += " AND segment_id = $3"
			}
			// The row as it was: the UPDATE must find it, and leave it.
			row := func() string {
				var row string
				require.NoError(t, f.pool.QueryRow(t.Context(),
					fmt.Sprintf("SELECT string_agg(x::text, ' ' ORDER BY x::text) FROM %s x WHERE %s AND $3::uuid IS NOT NULL", c.table, where),
					id.TopicIDPartition.TopicID, id.TopicIDPartition.Partition, id.ID).Scan(&row))
				return row
			}
			before := row()
			tag, err := f.pool.Exec(t.Context(), fmt.Sprintf("UPDATE %s SET %s WHERE %s AND $3::uuid IS NOT NULL", c.table, c.set, where),
				id.TopicIDPartition.TopicID, id.TopicIDPartition.Partition, id.ID)
			requireCheckViolation(t, err, c.table, c.rule)
			require.Zero(t, tag.RowsAffected())
			require.Equal(t, before, row())
		})
	}

	// A row inserted by hand meets the rules too.
	id := f.addSegmentIn(t, rs.CopySegmentFinished)
	_, err := f.pool.Exec(t.Context(), `
		INSERT INTO rlmm_partitions (topic_id, partition, topic, delete_state, delete_broker_id, delete_event_timestamp_ms)
		VALUES (gen_random_uuid(), 0, 'orders', 9, 1, 1)`)
	requireCheckViolation(t, err, "rlmm_partitions", "rlmm_delete_state_check")
	_, err = f.pool.Exec(t.Context(), `
		INSERT INTO rlmm_segment_epochs (topic_id, partition, segment_id, epoch, first_offset, last_offset, state,
		    segment_start_offset, segment_end_offset, added_version, last_version, segment_size_bytes, max_timestamp_ms)
		VALUES ($1, $2, $3, 5, 0, 9, 7, 0, 99, 1, 1, 1024, 0)`, id.TopicIDPartition.TopicID, id.TopicIDPartition.Partition, id.ID)
	requireCheckViolation(t, err, "rlmm_segment_epochs", "rlmm_segment_state_check")

	// Every CHECK constraint of the data tables and of their columns'
	// domains has a case above.
	rows, err := f.pool.Query(t.Context(), `
		SELECT conname::text FROM pg_constraint
		WHERE contype = 'c' AND (conrelid = ANY($1::regclass[])
		   OR contypid IN (SELECT a.atttypid FROM pg_attribute a WHERE a.attrelid = ANY($1::regclass[])))`,
		[]string{"rlmm_partitions", "rlmm_segments", "rlmm_segment_epochs", "rlmm_epoch_ends"})
	require.NoError(t, err)
	constraints, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.ElementsMatch(t, slices.Sorted(maps.Keys(covered)), constraints)
}

// requireCheckViolation checks that err is PostgreSQL's refusal of a row of
// table that breaks the CHECK constraint rule: the table's own (named
// <table>_..._check), or that of a column's domain (<domain>_check), which
// names the domain and not the table.
func requireCheckViolation(t *testing.T, err error, table, rule string) {
	t.Helper()
	var pgErr *pgconn.PgError
	if domain, ok := strings.CutSuffix(rule, "_check"); ok && !strings.HasPrefix(rule, table+"_") {
		requireGuardError(t, err, rule, fmt.Sprintf(`value for domain %s violates check constraint "%s"`, domain, rule))
		require.True(t, errors.As(err, &pgErr))
		require.Equal(t, domain, pgErr.DataTypeName, pgErr.Message)
		return
	}
	requireGuardError(t, err, rule, fmt.Sprintf(`new row for relation "%s" violates check constraint "%s"`, table, rule))
	require.True(t, errors.As(err, &pgErr))
	require.Equal(t, table, pgErr.TableName, pgErr.Message)
}

// epochRowCount returns how many epoch rows name the segment id.
func epochRowCount(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) (n int) {
	t.Helper()
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM rlmm_segment_epochs WHERE segment_id = $1", id).Scan(&n))
	return n
}

// The foreign key from the epoch rows to their segment
// (rlmm_segment_epochs_segment_fkey, ON DELETE CASCADE): a deleted segment
// takes its epoch rows with it and leaves the others'; TRUNCATE of the
// segments alone is refused (the epoch rows reference them), and with
// CASCADE empties both tables.
func TestDeletedSegmentTakesItsEpochRows(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := newGuardFixture(t)
	gone, kept := f.addSegmentIn(t, rs.CopySegmentFinished), f.addSegmentIn(t, rs.CopySegmentStarted)
	require.Equal(t, 2, epochRowCount(t, f.pool, gone.ID))
	require.Equal(t, 2, epochRowCount(t, f.pool, kept.ID))
	tag, err := f.pool.Exec(ctx, "DELETE FROM rlmm_segments WHERE segment_id = $1", gone.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())
	require.Zero(t, epochRowCount(t, f.pool, gone.ID))
	require.Equal(t, 2, epochRowCount(t, f.pool, kept.ID))

	_, err = f.pool.Exec(ctx, "TRUNCATE rlmm_segments")
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "want a PostgreSQL error, got %v", err)
	require.Equal(t, pgerrcode.FeatureNotSupported, pgErr.Code, pgErr.Message)
	require.Contains(t, pgErr.Message, "cannot truncate a table referenced in a foreign key constraint")
	require.Contains(t, pgErr.Detail, `Table "rlmm_segment_epochs" references "rlmm_segments".`)
	require.Equal(t, 2, epochRowCount(t, f.pool, kept.ID))

	_, err = f.pool.Exec(ctx, "TRUNCATE rlmm_segments CASCADE")
	require.NoError(t, err)
	var segments, epochRows int
	require.NoError(t, f.pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM rlmm_segments), (SELECT count(*) FROM rlmm_segment_epochs)").
		Scan(&segments, &epochRows))
	require.Zero(t, segments)
	require.Zero(t, epochRows)
}

// foreignKey is a foreign key of the schema, as the catalog describes it.
type foreignKey struct {
	name string
	// The referenced table, its key columns (and their types), and the
	// index of the key, which answers the check of a referencing row.
	table, index   string
	columns, types []string
	// The referencing table, its columns, its ON DELETE action
	// (pg_constraint.confdeltype) and the indexes whose leading columns are
	// those columns, one of which must answer the action.
	fkTable   string
	fkColumns []string
	onDelete  string
	fkIndexes []string
}

// onlyScan returns the scan of a JSON plan whose top node (LockRows,
// ModifyTable) has one child, the scan; for a bitmap heap scan, its
// bitmap index scan, after checking that the heap scan filters nothing.
func onlyScan(t *testing.T, what, raw string) map[string]any {
	t.Helper()
	var plans []struct {
		Plan struct {
			Plans []map[string]any `json:"Plans"`
		} `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal([]byte(raw), &plans))
	require.Len(t, plans[0].Plan.Plans, 1, "%s: %s", what, raw)
	scan := plans[0].Plan.Plans[0]
	if scan["Node Type"] == "Bitmap Heap Scan" {
		require.Nilf(t, scan["Filter"], "%s: the scan filters rows the index did not select:\n%s", what, raw)
		children, _ := scan["Plans"].([]any)
		require.Len(t, children, 1, "%s: %s", what, raw)
		scan = children[0].(map[string]any)
	}
	return scan
}

// Every foreign key is checked, on each write of a referencing row, by a
// query PostgreSQL plans once per connection: "SELECT 1 FROM ONLY <table> x
// WHERE <key columns> = $n FOR KEY SHARE OF x"; and its ON DELETE action
// runs, for each deleted referenced row, a statement on the referencing
// table ("DELETE FROM ONLY <table> WHERE $n = <columns>" for CASCADE). The
// plans of both must not depend on statistics: on tables never analyzed,
// empty (a connection's first write on a new cluster plans them then and
// keeps the plans) and full, with custom and generic plans, the check reads
// the referenced key's own index and the action an index of the
// referencing table that starts with its columns, every key column an index
// condition, filtering nothing. For the epoch rows' foreign key, that is
// rlmm_segments_segment_id_key and rlmm_segment_epochs_pkey.
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
		SELECT c.conname::text, c.confrelid::regclass::text, i.relname::text,
		       array(SELECT a.attname::text FROM unnest(c.confkey) WITH ORDINALITY k(attnum, n)
		             JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.attnum ORDER BY k.n),
		       array(SELECT format_type(a.atttypid, a.atttypmod) FROM unnest(c.confkey) WITH ORDINALITY k(attnum, n)
		             JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.attnum ORDER BY k.n),
		       c.conrelid::regclass::text,
		       array(SELECT a.attname::text FROM unnest(c.conkey) WITH ORDINALITY k(attnum, n)
		             JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum ORDER BY k.n),
		       c.confdeltype::text,
		       array(SELECT x.indexrelid::regclass::text FROM pg_index x
		             WHERE x.indrelid = c.conrelid AND x.indpred IS NULL
		               AND (SELECT array_agg(u.attnum ORDER BY u.n) FROM unnest(x.indkey::int2[]) WITH ORDINALITY u(attnum, n)
		                    WHERE u.n <= cardinality(c.conkey)) = c.conkey
		             ORDER BY 1)
		FROM pg_constraint c JOIN pg_class i ON i.oid = c.conindid
		WHERE c.contype = 'f' AND c.connamespace = current_schema()::regnamespace
		ORDER BY c.conname`)
	require.NoError(t, err)
	fks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (k foreignKey, err error) {
		err = r.Scan(&k.name, &k.table, &k.index, &k.columns, &k.types, &k.fkTable, &k.fkColumns, &k.onDelete, &k.fkIndexes)
		return k, err
	})
	require.NoError(t, err)
	i := slices.IndexFunc(fks, func(k foreignKey) bool { return k.name == "rlmm_segment_epochs_segment_fkey" })
	require.GreaterOrEqual(t, i, 0, "the epoch rows' foreign key: %v", fks)
	require.Equal(t, foreignKey{
		name: "rlmm_segment_epochs_segment_fkey", table: "rlmm_segments", index: "rlmm_segments_segment_id_key",
		columns: []string{"segment_id"}, types: []string{"uuid"},
		fkTable: "rlmm_segment_epochs", fkColumns: []string{"segment_id"}, onDelete: "c",
		fkIndexes: []string{"rlmm_segment_epochs_pkey"},
	}, fks[i])

	neverAnalyzed := func(t *testing.T, tables ...string) {
		t.Helper()
		for _, table := range tables {
			var tuples float64
			require.NoError(t, pool.QueryRow(ctx, "SELECT reltuples FROM pg_class WHERE oid = $1::regclass", table).Scan(&tuples))
			require.Negativef(t, tuples, "%s was analyzed or vacuumed: the planner has statistics", table)
		}
	}
	// explain returns the scan of the plan of sql with the key values args,
	// under plan_cache_mode mode.
	explain := func(t *testing.T, k foreignKey, what, mode, sql string, args []any) map[string]any {
		t.Helper()
		conn, err := pool.Acquire(ctx)
		require.NoError(t, err)
		defer conn.Release()
		what = fmt.Sprintf("%s, %s (%s)", k.name, what, mode)
		return onlyScan(t, what, plancheck.Explain(t, conn.Conn(), mode, sql, args).Plan)
	}
	requireReads := func(t *testing.T, what string, scan map[string]any, indexes, columns []string) {
		t.Helper()
		require.Containsf(t, indexes, scan["Index Name"], "%s reads another index than %v:\n%v", what, indexes, scan)
		require.Nilf(t, scan["Filter"], "%s filters rows the index did not select:\n%v", what, scan)
		for _, col := range columns {
			require.Containsf(t, scan["Index Cond"], col, "%s: %s is not an index condition:\n%v", what, col, scan)
		}
	}
	check := func(t *testing.T, k foreignKey) {
		neverAnalyzed(t, k.table, k.fkTable)
		// The key of a referenced row if there is one, else any value; as
		// text, which the simple protocol quotes: the literal takes the
		// parameter's type.
		texts := make([]string, len(k.columns))
		for i, col := range k.columns {
			texts[i] = col + "::text"
		}
		var key []string
		err := pool.QueryRow(ctx, fmt.Sprintf("SELECT ARRAY[%s] FROM ONLY %s LIMIT 1", strings.Join(texts, ", "), k.table)).Scan(&key)
		if errors.Is(err, pgx.ErrNoRows) {
			key = make([]string, len(k.columns))
			for i, typ := range k.types {
				key[i] = "1"
				if typ == "uuid" {
					key[i] = "00000000-0000-0000-0000-000000000001"
				}
			}
		} else {
			require.NoError(t, err)
		}
		args := make([]any, len(key))
		for i := range key {
			args[i] = key[i]
		}
		conds := make([]string, len(k.columns))
		actionConds := make([]string, len(k.fkColumns))
		for i, col := range k.columns {
			conds[i] = fmt.Sprintf("%s OPERATOR(pg_catalog.=) $%d", col, i+1)
		}
		for i, col := range k.fkColumns {
			actionConds[i] = fmt.Sprintf("$%d OPERATOR(pg_catalog.=) %s", i+1, col)
		}
		var action string
		switch k.onDelete {
		case "c":
			action = fmt.Sprintf("DELETE FROM ONLY %s WHERE %s", k.fkTable, strings.Join(actionConds, " AND "))
		case "a", "r":
			action = fmt.Sprintf("SELECT 1 FROM ONLY %s x WHERE %s FOR KEY SHARE OF x", k.fkTable, strings.Join(actionConds, " AND "))
		default:
			t.Fatalf("%s: ON DELETE %s: add the statement PostgreSQL runs for it", k.name, k.onDelete)
		}
		checkSQL := fmt.Sprintf("SELECT 1 FROM ONLY %s x WHERE %s FOR KEY SHARE OF x", k.table, strings.Join(conds, " AND "))
		require.NotEmpty(t, k.fkIndexes, "%s: no index of %s starts with %v: its ON DELETE action reads the whole table", k.name, k.fkTable, k.fkColumns)
		for _, mode := range plancheck.PlanCacheModes {
			requireReads(t, k.name+" check ("+mode+")", explain(t, k, "check", mode, checkSQL, args), []string{k.index}, k.columns)
			requireReads(t, k.name+" ON DELETE ("+mode+")", explain(t, k, "ON DELETE", mode, action, args), k.fkIndexes, k.fkColumns)
		}
	}
	for _, k := range fks {
		t.Run("empty/"+k.name, func(t *testing.T) { check(t, k) })
	}
	// The same on full tables that nothing has analyzed.
	m, err := rs.NewPgManager(ctx, pool)
	require.NoError(t, err)
	t.Cleanup(m.Close)
	tp := rstest.TP(0)
	for i := range int64(300) {
		s := rstest.Segment(tp, i*100, i*100+99, map[rs.LeaderEpoch]int64{0: i * 100})
		require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, s))
		require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, rstest.Update(s, rs.CopySegmentFinished)))
	}
	for _, k := range fks {
		t.Run("full/"+k.name, func(t *testing.T) { check(t, k) })
	}
}
