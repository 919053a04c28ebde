package main

// load.go: bulk-loading a shape with COPY, the way PostgreSQL's "Populating
// a Database" advises: secondary indexes and foreign keys are dropped first
// and rebuilt from their own definitions afterwards, so the loaded schema is
// exactly the migrated one. The tables' triggers (guards of raw DML) are
// disabled for the load: the rows are written as the library writes them.

import (
	"context"
	"fmt"

	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"
)

var loadedTables = []string{"rlmm_partitions", "rlmm_segments", "rlmm_segment_epochs"}

// loadShapes loads every shape into the (migrated, empty) database of pool,
// with workers COPY streams at a time, then vacuums and analyzes.
func loadShapes(ctx context.Context, pool *pgxpool.Pool, workers int, shapes ...shape) error {
	begin := time.Now()
	// A schema that indexes the segments of one epoch by it
	// (rlmm_segments_epoch_list_idx, asked before the load drops it) keeps
	// epoch rows only for the segments that span several.
	var oneRowPerSegment bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass('rlmm_segments_epoch_list_idx') IS NOT NULL").Scan(&oneRowPerSegment); err != nil {
		return err
	}
	rebuild, err := dropForLoad(ctx, pool)
	if err != nil {
		return err
	}
	var lastVersion int64
	for _, s := range shapes {
		if err := loadShape(ctx, pool, workers, s, oneRowPerSegment); err != nil {
			return fmt.Errorf("load %s: %w", s.name, err)
		}
		lastVersion = max(lastVersion, addedVersion(s.perPartition-1)+1)
	}
	// The library's writes take their versions from rlmm_versions: move it
	// past the loaded ones, so that the measured writes order after them.
	if _, err := pool.Exec(ctx, "SELECT setval('rlmm_versions', greatest(nextval('rlmm_versions'), $1::bigint))", lastVersion); err != nil {
		return err
	}
	loaded := time.Now()
	// Indexes first (two at a time), then the foreign keys that need them.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for _, stmt := range rebuild.indexes {
		g.Go(func() error { return execMaintenance(gctx, pool, stmt) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, stmt := range rebuild.constraints {
		if err := execMaintenance(ctx, pool, stmt); err != nil {
			return err
		}
	}
	for _, table := range loadedTables {
		if _, err := pool.Exec(ctx, "ALTER TABLE "+table+" ENABLE TRIGGER USER"); err != nil {
			return err
		}
	}
	// rlmm_epoch_ends stays empty: it holds the ends of purged segments.
	vacuumed := loadedTables
	indexed := time.Now()
	// Sets the visibility map (index-only scans) and the statistics; FREEZE
	// spares the measurements an anti-wraparound vacuum.
	for _, table := range vacuumed {
		if err := execMaintenance(ctx, pool, "VACUUM (FREEZE, ANALYZE) "+table); err != nil {
			return err
		}
	}
	_, _ = pool.Exec(ctx, "CHECKPOINT") // needs pg_checkpoint or superuser; best effort
	logf("loaded %d segments: COPY %s, indexes and keys %s, vacuum %s",
		totalSegments(shapes), loaded.Sub(begin).Round(time.Second), indexed.Sub(loaded).Round(time.Second), time.Since(indexed).Round(time.Second))
	return nil
}

func totalSegments(shapes []shape) int {
	n := 0
	for _, s := range shapes {
		n += s.segments()
	}
	return n
}

// execMaintenance runs a statement with memory for sorting large indexes.
func execMaintenance(ctx context.Context, pool *pgxpool.Pool, stmt string) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET maintenance_work_mem = '512MB'"); err != nil {
		return err
	}
	defer conn.Exec(context.Background(), "RESET maintenance_work_mem") //nolint:errcheck // the pool is closed soon
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("%s: %w", stmt, err)
	}
	return nil
}

// rebuildStatements recreate what dropForLoad dropped.
type rebuildStatements struct {
	indexes     []string
	constraints []string
}

// dropForLoad drops the secondary indexes (those that back no constraint)
// and the foreign keys of the loaded tables, disables their triggers, and
// returns the statements,
// from pg_get_indexdef and pg_get_constraintdef, that recreate them.
func dropForLoad(ctx context.Context, pool *pgxpool.Pool) (rebuildStatements, error) {
	var r rebuildStatements
	rows, err := pool.Query(ctx, `
SELECT format('ALTER TABLE %s ADD CONSTRAINT %I %s', c.conrelid::regclass, c.conname, pg_get_constraintdef(c.oid)),
       format('ALTER TABLE %s DROP CONSTRAINT %I', c.conrelid::regclass, c.conname)
FROM pg_constraint c
WHERE c.contype = 'f' AND c.conrelid = ANY($1::regclass[])
ORDER BY c.conname`, loadedTables)
	if err != nil {
		return r, err
	}
	var drops []string
	for rows.Next() {
		var add, drop string
		if err := rows.Scan(&add, &drop); err != nil {
			return r, err
		}
		r.constraints = append(r.constraints, add)
		drops = append(drops, drop)
	}
	if err := rows.Err(); err != nil {
		return r, err
	}
	rows, err = pool.Query(ctx, `
SELECT pg_get_indexdef(i.indexrelid), format('DROP INDEX %s', i.indexrelid::regclass)
FROM pg_index i
WHERE i.indrelid = ANY($1::regclass[])
  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)
ORDER BY i.indexrelid::regclass::text`, loadedTables)
	if err != nil {
		return r, err
	}
	for rows.Next() {
		var create, drop string
		if err := rows.Scan(&create, &drop); err != nil {
			return r, err
		}
		r.indexes = append(r.indexes, create)
		drops = append(drops, drop)
	}
	if err := rows.Err(); err != nil {
		return r, err
	}
	for _, table := range loadedTables {
		drops = append(drops, "ALTER TABLE "+table+" DISABLE TRIGGER USER")
	}
	for _, stmt := range drops {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			return r, fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return r, nil
}

// loadShape COPYs the partitions of s, then their segments and epoch rows in
// chunks, workers chunks at a time.
func loadShape(ctx context.Context, pool *pgxpool.Pool, workers int, s shape, oneRowPerSegment bool) error {
	_, err := pool.CopyFrom(ctx, pgx.Identifier{"rlmm_partitions"},
		[]string{"topic_id", "partition", "topic", "max_segment_span"},
		copyRows(s.partitions, func(p int) []any {
			tp := s.tp(p)
			return []any{tp.TopicID, tp.Partition, tp.Topic, int64(segmentLen - 1)}
		}))
	if err != nil {
		return fmt.Errorf("copy partitions: %w", err)
	}
	// Rows go in the order brokers would have added them: segment j of every
	// partition before segment j+1 of any, so that a partition's segments
	// are spread over the heap as they are in a live database, not packed.
	const chunk = 200_000 // rows per COPY
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	progress := newProgress(s.name, s.segments())
	for first := 0; first < s.segments(); first += chunk {
		last := min(first+chunk, s.segments())
		g.Go(func() error {
			if err := copySegments(gctx, pool, s, first, last, oneRowPerSegment); err != nil {
				return err
			}
			progress.add(last - first)
			return nil
		})
	}
	return g.Wait()
}

// copySegments COPYs rows [first, last) of s: row i is segment i/partitions
// of partition i%partitions. The segments and their epoch rows go in one
// transaction, whose id every segment row carries (last_xid), as a write
// of the library stamps its own.
func copySegments(ctx context.Context, pool *pgxpool.Pool, s shape, first, last int, oneRowPerSegment bool) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return copySegmentsIn(ctx, tx, s, first, last, oneRowPerSegment)
	})
}

// copySegmentsIn is copySegments in the transaction tx.
func copySegmentsIn(ctx context.Context, tx pgx.Tx, s shape, first, last int, oneRowPerSegment bool) error {
	var xid uint64
	if err := tx.QueryRow(ctx, "SELECT pg_current_xact_id()").Scan(&xid); err != nil {
		return err
	}
	n := last - first
	at := func(i int) (p, j int) { return (first + i) % s.partitions, (first + i) / s.partitions }
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"rlmm_segments"},
		[]string{"topic_id", "partition", "segment_id", "topic", "start_offset", "end_offset",
			"max_timestamp_ms", "broker_id", "event_timestamp_ms", "segment_size_bytes",
			"custom_metadata", "state", "txn_index_empty", "epochs", "epoch_start_offsets",
			"added_version", "finished_version", "last_version", "last_xid"},
		copyRows(n, func(i int) []any {
			p, j := at(i)
			m := s.segmentMetadata(p, j)
			epochs, firsts, _ := epochRanges(j)
			return []any{m.SegmentID.TopicIDPartition.TopicID, m.SegmentID.TopicIDPartition.Partition, m.SegmentID.ID,
				m.SegmentID.TopicIDPartition.Topic, m.StartOffset, m.EndOffset,
				m.MaxTimestampMs, m.BrokerID, m.EventTimestampMs, m.SegmentSizeInBytes,
				m.CustomMetadata, int16(1), m.TxnIndexEmpty, epochs, firsts,
				addedVersion(j), addedVersion(j) + 1, addedVersion(j) + 1, xid}
		}))
	if err != nil {
		return fmt.Errorf("copy segments: %w", err)
	}
	// The epoch rows: the ranges precomputed, with copies of the segment's
	// state, offsets, versions, size and largest timestamp, as SegmentAdd
	// and SegmentUpdate keep them (with oneRowPerSegment, only those of the
	// segments that span several epochs).
	type epochRow struct{ p, j, k int }
	var rows []epochRow
	for i := range n {
		p, j := at(i)
		epochs, _, _ := epochRanges(j)
		if len(epochs) == 1 && oneRowPerSegment {
			continue
		}
		for k := range epochs {
			rows = append(rows, epochRow{p, j, k})
		}
	}
	columns := []string{"topic_id", "partition", "segment_id", "epoch", "first_offset", "last_offset", "state",
		"segment_start_offset", "segment_end_offset", "added_version", "finished_version"}
	epochsHaveLastVersion, err := hasColumn(ctx, tx, "rlmm_segment_epochs", "last_version")
	if err != nil {
		return err
	}
	if epochsHaveLastVersion {
		columns = append(columns, "last_version") // a copy of the segment's
	}
	epochsHaveCopies, err := hasColumn(ctx, tx, "rlmm_segment_epochs", "segment_size_bytes")
	if err != nil {
		return err
	}
	if epochsHaveCopies {
		columns = append(columns, "segment_size_bytes", "max_timestamp_ms") // schema 15 on
	}
	_, err = tx.CopyFrom(ctx, pgx.Identifier{"rlmm_segment_epochs"}, columns,
		copyRows(len(rows), func(i int) []any {
			r := rows[i]
			tp := s.tp(r.p)
			epochs, firsts, lasts := epochRanges(r.j)
			row := []any{tp.TopicID, tp.Partition, s.segmentID(r.p, r.j), epochs[r.k], firsts[r.k], lasts[r.k], int16(1),
				segmentStart(r.j), segmentEnd(r.j), addedVersion(r.j), addedVersion(r.j) + 1}
			if epochsHaveLastVersion {
				row = append(row, addedVersion(r.j)+1)
			}
			if epochsHaveCopies {
				m := s.segmentMetadata(r.p, r.j)
				row = append(row, m.SegmentSizeInBytes, m.MaxTimestampMs)
			}
			return row
		}))
	if err != nil {
		return fmt.Errorf("copy epochs: %w", err)
	}
	return nil
}

func hasColumn(ctx context.Context, tx pgx.Tx, table, column string) (bool, error) {
	var ok bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM information_schema.columns
WHERE table_schema = current_schema() AND table_name = $1 AND column_name = $2)`, table, column).Scan(&ok)
	return ok, err
}

// addedVersion is the version (write order, rlmm_versions) of segment j's
// add in every partition: a partition's adds and finishes alternate, add j
// at 2j+1 and its finish at 2j+2. The numbers repeat across partitions,
// which the library never compares.
func addedVersion(j int) int64 { return 2*int64(j) + 1 }

// copyRows adapts a row function to pgx.CopyFromSource.
func copyRows(n int, row func(i int) []any) pgx.CopyFromSource {
	i := -1
	return pgx.CopyFromFunc(func() ([]any, error) {
		i++
		if i >= n {
			return nil, nil
		}
		return row(i), nil
	})
}

// progress logs a load's progress every few seconds.
type progress struct {
	mu     sync.Mutex
	name   string
	total  int
	start  time.Time
	logged time.Time
	done   int
}

func newProgress(name string, total int) *progress {
	return &progress{name: name, total: total, start: time.Now(), logged: time.Now()}
}

func (p *progress) add(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	if time.Since(p.logged) > 10*time.Second || p.done == p.total {
		p.logged = time.Now()
		rate := float64(p.done) / time.Since(p.start).Seconds()
		logf("  %s: %d/%d segments copied (%.0f/s)", p.name, p.done, p.total, rate)
	}
}

// prewarm reads the loaded tables and their indexes into the OS page cache
// (pg_prewarm's 'read' mode), so that every run starts from the same warm
// state whatever ran before: a database that is read is cached. Without
// the extension, the tables alone are read by a sequential scan.
func prewarm(ctx context.Context, pool *pgxpool.Pool) error {
	begin := time.Now()
	if _, err := pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_prewarm"); err == nil {
		// Into the OS page cache, then into shared buffers as far as they
		// go, smallest relations (indexes) first.
		var read, buffered int64
		err := pool.QueryRow(ctx, `
WITH rels AS (
    SELECT c.oid, pg_relation_size(c.oid) AS bytes
    FROM pg_class c
    WHERE c.oid = ANY($1::regclass[])
       OR c.oid IN (SELECT i.indexrelid FROM pg_index i WHERE i.indrelid = ANY($1::regclass[]))
), os AS (
    SELECT coalesce(sum(pg_prewarm(oid, 'read')), 0)::bigint AS blocks FROM rels
), shared AS (
    SELECT coalesce(sum(pg_prewarm(r.oid, 'buffer')), 0)::bigint AS blocks
    FROM (SELECT oid, sum(bytes) OVER (ORDER BY bytes, oid) AS running FROM rels) r
    WHERE r.running <= (SELECT setting::bigint * 8192 * 3 / 4 FROM pg_settings WHERE name = 'shared_buffers')
)
SELECT os.blocks, shared.blocks FROM os, shared`, loadedTables).Scan(&read, &buffered)
		if err != nil {
			return fmt.Errorf("pg_prewarm: %w", err)
		}
		logf("prewarmed %d MiB into the OS page cache and %d MiB into shared buffers in %s",
			read*8/1024, buffered*8/1024, time.Since(begin).Round(time.Millisecond))
		return nil
	}
	for _, table := range loadedTables {
		if _, err := pool.Exec(ctx, "SELECT count(*) FROM "+table); err != nil {
			return err
		}
	}
	logf("read the tables (no pg_prewarm) in %s", time.Since(begin).Round(time.Millisecond))
	return nil
}
