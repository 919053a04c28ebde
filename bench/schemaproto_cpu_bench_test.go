package bench_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
)

// backendCPU is the CPU time (user + system) the server process behind the
// pool's only connection has used so far: the server is local (pgtest's
// throwaway cluster), so /proc tells. Unlike a call's wall time, it does not
// grow when other processes take the cores, so it compares layouts on a busy
// machine: at 32 clients the two cores are the bound, and the ratio of
// server CPU per call is what the ratio of throughputs tends to.
func backendCPU(b *testing.B, pid int32) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(b, err)
	// The command name (field 2) is in parentheses and may hold spaces.
	fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+2:]))
	utime, err := strconv.ParseInt(fields[11], 10, 64)
	require.NoError(b, err)
	stime, err := strconv.ParseInt(fields[12], 10, 64)
	require.NoError(b, err)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// BenchmarkSchemaProtoCPU: server CPU per add + finish (and per lookup) on
// one connection, each variant on a database of its own, next to the raw
// statements. Reports server-µs/op.
//
//	go test -run '^$' -bench '^BenchmarkSchemaProtoCPU$' -benchtime 3000x ./bench
//
// dropForeignKey drops the epoch rows' foreign key, for the variants that
// measure what it costs.
const dropForeignKey = `
ALTER TABLE rlmm_segment_epochs DROP CONSTRAINT rlmm_segment_epochs_segment_fkey;`

// dropChecks drops the data tables' CHECK constraints and those of their
// columns' domains (every row rule), for the variants that measure what
// they cost.
const dropChecks = `
DO $$
DECLARE c record;
BEGIN
    FOR c IN SELECT conrelid::regclass AS tbl, conname FROM pg_constraint
             WHERE contype = 'c' AND conrelid IN ('rlmm_partitions'::regclass, 'rlmm_segments'::regclass,
                                                  'rlmm_segment_epochs'::regclass, 'rlmm_epoch_ends'::regclass) LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', c.tbl, c.conname);
    END LOOP;
    FOR c IN SELECT contypid::regtype AS typ, conname FROM pg_constraint
             WHERE contype = 'c' AND contypid::regtype::text LIKE 'rlmm\_%' LOOP
        EXECUTE format('ALTER DOMAIN %s DROP CONSTRAINT %I', c.typ, c.conname);
    END LOOP;
END
$$;`

// tableChecks puts every row rule back as a CHECK constraint of its table,
// one per rule, the single-value rules included (none on a domain): what
// the domains save.
const tableChecks = dropChecks + `
ALTER TABLE rlmm_partitions ADD CONSTRAINT rlmm_partitions_partition_check CHECK (partition >= 0),
    ADD CONSTRAINT rlmm_partitions_topic_check CHECK (length(topic) BETWEEN 1 AND 249 AND topic NOT IN ('.', '..')
        AND ltrim(topic, 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-') = ''),
    ADD CONSTRAINT rlmm_partitions_counters_check CHECK (max_segment_span >= 0 AND delete_version >= 0),
    ADD CONSTRAINT rlmm_partitions_delete_state_check CHECK (delete_state IN (0, 1, 2)),
    ADD CONSTRAINT rlmm_partitions_delete_fields_check CHECK ((delete_state IS NULL) = (delete_broker_id IS NULL)
        AND (delete_state IS NULL) = (delete_event_timestamp_ms IS NULL));
ALTER TABLE rlmm_segments ADD CONSTRAINT rlmm_segments_state_check CHECK (state IN (0, 1, 2, 3)),
    ADD CONSTRAINT rlmm_segments_offsets_check CHECK (0 <= start_offset AND start_offset <= end_offset),
    ADD CONSTRAINT rlmm_segments_size_check CHECK (segment_size_bytes >= 0),
    ADD CONSTRAINT rlmm_segments_versions_check CHECK (added_version <= last_version
        AND (finished_version IS NULL OR (added_version < finished_version AND finished_version <= last_version))
        AND (state <> 1 OR finished_version IS NOT NULL)),
    ADD CONSTRAINT rlmm_segments_epochs_check CHECK (cardinality(epochs) >= 1
        AND cardinality(epochs) = cardinality(epoch_start_offsets)
        AND epoch_start_offsets[1] >= start_offset
        AND epoch_start_offsets[cardinality(epoch_start_offsets)] <= end_offset);
ALTER TABLE rlmm_segment_epochs ADD CONSTRAINT rlmm_segment_epochs_epoch_check CHECK (epoch >= 0),
    ADD CONSTRAINT rlmm_segment_epochs_state_check CHECK (state IN (0, 1, 2, 3) AND (state <> 1 OR finished_version IS NOT NULL)),
    ADD CONSTRAINT rlmm_segment_epochs_range_check CHECK (segment_start_offset <= first_offset AND first_offset <= last_offset
        AND last_offset <= segment_end_offset);
ALTER TABLE rlmm_epoch_ends ADD CONSTRAINT rlmm_epoch_ends_values_check CHECK (epoch >= 0 AND end_offset >= 0);`

// oneCheckPerTable replaces each data table's CHECK constraints with one
// that ANDs their expressions: what the number of constraints costs.
const oneCheckPerTable = dropChecks + `
ALTER TABLE rlmm_partitions ADD CONSTRAINT rlmm_partitions_check CHECK (partition >= 0
    AND length(topic) BETWEEN 1 AND 249 AND topic NOT IN ('.', '..')
    AND ltrim(topic, 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-') = ''
    AND max_segment_span >= 0 AND delete_version >= 0
    AND (delete_state IS NULL OR delete_state IN (0, 1, 2))
    AND (delete_state IS NULL) = (delete_broker_id IS NULL) AND (delete_state IS NULL) = (delete_event_timestamp_ms IS NULL));
ALTER TABLE rlmm_segments ADD CONSTRAINT rlmm_segments_check CHECK (state IN (0, 1, 2, 3)
    AND 0 <= start_offset AND start_offset <= end_offset AND segment_size_bytes >= 0
    AND added_version <= last_version
    AND (finished_version IS NULL OR (added_version < finished_version AND finished_version <= last_version))
    AND (state <> 1 OR finished_version IS NOT NULL)
    AND cardinality(epochs) >= 1 AND cardinality(epochs) = cardinality(epoch_start_offsets)
    AND epoch_start_offsets[1] >= start_offset AND epoch_start_offsets[cardinality(epoch_start_offsets)] <= end_offset);
ALTER TABLE rlmm_segment_epochs ADD CONSTRAINT rlmm_segment_epochs_check CHECK (epoch >= 0
    AND state IN (0, 1, 2, 3) AND (state <> 1 OR finished_version IS NOT NULL)
    AND segment_start_offset <= first_offset AND first_offset <= last_offset AND last_offset <= segment_end_offset);
ALTER TABLE rlmm_epoch_ends ADD CONSTRAINT rlmm_epoch_ends_check CHECK (epoch >= 0 AND end_offset >= 0);`

func BenchmarkSchemaProtoCPU(b *testing.B) {
	raw := `
CREATE TABLE bench_raw (id integer PRIMARY KEY, event_timestamp_ms bigint NOT NULL, pad text NOT NULL);
INSERT INTO bench_raw SELECT g, 0, repeat('x', 150) FROM generate_series(0, 1999) g;
ANALYZE bench_raw;`
	library := writeFloorDatabase(b, raw)
	noKey := writeFloorDatabase(b, raw+dropForeignKey)
	noChecks := writeFloorDatabase(b, raw+dropChecks)
	noKeyNoChecks := writeFloorDatabase(b, raw+dropForeignKey+dropChecks)
	oneCheck := writeFloorDatabase(b, raw+oneCheckPerTable)
	tableRules := writeFloorDatabase(b, raw+tableChecks)
	bare := writeFloorDatabase(b, raw+bareSegments)
	oneRow := writeFloorDatabase(b, protoSchema(false))
	oneRowHOT := writeFloorDatabase(b, protoSchema(true))
	oneRowXid := writeFloorDatabase(b, protoXidSchema())
	oneRowXidNoRule := writeFloorDatabase(b, protoXidSchema()+`;
ALTER TABLE p_segments DROP CONSTRAINT p_segments_valid;`)
	for _, v := range []struct {
		name string
		dsn  string
		op   writeFloorOp
	}{
		{"two raw UPDATE commits", library, rawTwoCommits},
		{"library", library, libraryAddFinish},
		{"library without the epoch rows' foreign key", noKey, libraryAddFinish},
		{"library without the CHECK constraints", noChecks, libraryAddFinish},
		{"library without the foreign key and the CHECKs", noKeyNoChecks, libraryAddFinish},
		{"library with one CHECK per table", oneCheck, libraryAddFinish},
		{"library with every rule a CHECK of its table", tableRules, libraryAddFinish},
		{"bare segments table", bare, bareAddFinish},
		{"one row", oneRow, protoAddFinish(false)},
		{"one row HOT", oneRowHOT, protoAddFinish(true)},
		{"one row HOT without the change feed", oneRowHOT, protoShape{hot: true, partition: true, ends: true}.addFinish()},
		{"one row HOT without the epoch ends", oneRowHOT, protoShape{hot: true, feed: true, partition: true}.addFinish()},
		{"one row HOT without the partition row", oneRowHOT, protoShape{hot: true}.addFinish()},
		{"one row ordered by an advisory lock and a sequence", oneRow, protoShape{ends: true, lockSeq: true}.addFinish()},
		{"one row ordered by an advisory lock and a sequence, without the epoch ends", oneRow, protoShape{lockSeq: true}.addFinish()},
		{"one row bumped by a plain UPDATE", oneRow, protoShape{ends: true, plainBump: true}.addFinish()},
		{"one row without the partition row and the epoch ends", oneRow, protoShape{}.addFinish()},
		{"one row, a change feed by transaction id", oneRowXid, protoShape{ends: true, xidOrder: true}.addFinish()},
		{"one row, a change feed by transaction id, without the epoch ends", oneRowXid, protoShape{xidOrder: true}.addFinish()},
		{"one row, a change feed by transaction id, the partition row locked FOR KEY SHARE, without the epoch ends", oneRowXid, protoShape{xidOrder: true, keyShare: true}.addFinish()},
		{"one row, a change feed by transaction id, without the epoch ends and the row rule", oneRowXidNoRule, protoShape{xidOrder: true}.addFinish()},
		{"two raw UPDATE commits again", library, rawTwoCommits},
	} {
		b.Run(v.name, func(b *testing.B) {
			w := writeFloor{pool: protoPool(b, v.dsn), clients: 1, topic: uuid.New()}
			m, err := rs.NewPgManager(b.Context(), w.pool)
			require.NoError(b, err)
			b.Cleanup(m.Close)
			w.m = m
			var pid int32
			require.NoError(b, w.pool.QueryRow(b.Context(), "SELECT pg_backend_pid()").Scan(&pid))
			rng := rand.New(rand.NewPCG(1, 2))
			// Warm the connection's plans and caches first.
			for range 50 {
				require.NoError(b, v.op(b.Context(), &w, rng))
			}
			before := backendCPU(b, pid)
			b.ResetTimer()
			for range b.N {
				if err := v.op(b.Context(), &w, rng); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((backendCPU(b, pid)-before).Microseconds())/float64(b.N), "server-µs/op")
		})
	}
}
