package remotestorage

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/krabka/remotestorage/db"
	"github.com/krabka/remotestorage/internal/cache"
	"github.com/krabka/remotestorage/internal/dbuuid"
	"github.com/krabka/remotestorage/internal/partition"
)

// PgManager is a RemoteLogMetadataManager that keeps the metadata in
// PostgreSQL. Any number of PgManagers, in any number of processes, may share
// one database. Every operation that succeeds is one round trip (one SQL
// statement whose WHERE clause enforces the state machine), except a write
// that races another on the same partition and CaughtUp with a read replica
// (docs/ARCHITECTURE.md, "How a call flows").
type PgManager struct {
	pool    *pgxpool.Pool // the primary: every write, and queries without a replica
	reader  *pgxpool.Pool // where queries go: the replica, or pool
	queries *db.Queries
	opts    options
	cache   *cache.Cache    // nil without WithCache
	notify  *cache.Notifier // tells other caches of this manager's writes, after commit
	side    *cache.SideConn // the connection of the manager's background statements
	purger  *purger         // the background purge (purger.go); nil when off
	purged  atomic.Int64
	// lastPurge is the Unix time in nanoseconds at which a purge last
	// succeeded; 0 before the first.
	lastPurge atomic.Int64
}

var _ RemoteLogMetadataManager = (*PgManager)(nil)
var _ KafkaExtensions = (*PgManager)(nil)
var _ SegmentStreams = (*PgManager)(nil)
var _ PartitionDeleteStates = (*PgManager)(nil)

// NewPgManager returns a manager over pool. It fails when the database
// cannot be reached, when its schema is older than SchemaVersion (run
// Migrate first), and when it is newer through a migration that does not
// declare this code compatible (docs/MIGRATIONS.md); a newer schema whose
// migrations all do is accepted.
// The pools stay the caller's: Close does not close them.
func NewPgManager(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*PgManager, error) {
	if err := checkServerVersion(ctx, pool, opts...); err != nil {
		return nil, err
	}
	if err := checkSchemaVersion(ctx, pool); err != nil {
		return nil, err
	}
	m := &PgManager{pool: pool, reader: pool, queries: db.New(), opts: newOptions(opts)}
	m.side = cache.NewSideConn(pool)
	m.notify = cache.NewNotifier(m.side, m.logWarn)
	if m.opts.readReplica != nil {
		m.reader = m.opts.readReplica
	}
	m.warnClosesOnCancel()
	if m.opts.cache {
		m.cache = cache.New(m.cacheConfig())
	}
	m.purger = startPurger(m.opts.retention(), m.PurgeForgotten, m.logWarn, m.logInfo)
	return m, nil
}

// warnClosesOnCancel warns, through WithLogger's logger, about each of the
// manager's pools whose connections die when a caller's deadline interrupts
// a statement.
func (m *PgManager) warnClosesOnCancel() {
	pools := []*pgxpool.Pool{m.pool}
	if m.reader != m.pool {
		pools = append(pools, m.reader)
	}
	for i, pool := range pools {
		if closesOnCancel(pool) {
			role := []string{"primary", "read replica"}[i]
			m.logWarn("the "+role+" pool closes a connection whenever a context ends during its statement (pgx's default), and a new connection's first statements cost several warm ones; "+
				"the manager's single statements send a cancel request instead, but its transactions and other users of the pool do not: "+
				"build the pool with remotestorage.NewPool, or apply remotestorage.ConfigurePool to its configuration", "pool", role)
		}
	}
}

// Close stops the manager's background work (the sender of its
// notifications, which first sends what is queued, and the cache's listener
// and loaders). The pools are left open.
func (m *PgManager) Close() {
	m.purger.stop()
	m.notify.Close()
	if m.cache != nil {
		m.cache.Close()
	}
	m.side.Close()
}

// cacheConfig is what the cache needs of the manager.
func (m *PgManager) cacheConfig() cache.Config {
	interval := DefaultCachePollInterval
	if m.opts.cachePollSet {
		interval = m.opts.cachePoll
	}
	return cache.Config{
		Pool: m.pool, Queries: m.queries, Side: m.side,
		Warn: m.logWarn, Info: m.logInfo, Logger: m.opts.logger,
		ListenerConnConfig: m.opts.listenerConnConfig,
		PollInterval:       interval, Loaders: m.opts.cacheLoaders,
	}
}

// logWarn logs what the manager's background work could not do, through
// WithLogger's logger.
func (m *PgManager) logWarn(msg string, args ...any) {
	if m.opts.logger != nil {
		m.opts.logger.Warn("remotestorage: "+msg, args...)
	}
}

// logInfo logs that the manager's background work recovered.
func (m *PgManager) logInfo(msg string, args ...any) {
	if m.opts.logger != nil {
		m.opts.logger.Info("remotestorage: "+msg, args...)
	}
}

// committed records a write that committed: in this manager's cache first
// (so the write is there before the call returns, and this manager's own
// listener, hearing of it, finds nothing to catch up), then in the queue
// of notifications for the others.
func (m *PgManager) committed(tp TopicIDPartition, w cache.OwnWrite, write func(d *cache.Data)) {
	if m.cache != nil {
		m.cache.Applied(partition.TopicIDPartition(tp), w, write)
	}
	m.notify.Notify(keyOf(tp), w.Order)
}

// OnPartitionLeadershipChanges is Kafka's assignment hook: the manager
// consumes the partitions it leads and follows. With WithCache, each
// partition not consumed yet starts loading; a partition assigned twice is
// not reloaded. Without WithCache there is nothing to do: every query goes
// to the database whether or not the manager consumes the partition.
func (m *PgManager) OnPartitionLeadershipChanges(ctx context.Context, leaders, followers []TopicIDPartition) error {
	if m.cache != nil {
		m.cache.Assign(cacheTPs(append(append([]TopicIDPartition{}, leaders...), followers...)))
	}
	return nil
}

// OnStopPartitions is Kafka's hook for partitions the manager no longer
// consumes: the cache drops them (nothing to do without WithCache).
func (m *PgManager) OnStopPartitions(ctx context.Context, partitions []TopicIDPartition) error {
	if m.cache != nil {
		m.cache.Stop(cacheTPs(partitions))
	}
	return nil
}

// cacheTPs converts tps for the cache.
func cacheTPs(tps []TopicIDPartition) []partition.TopicIDPartition {
	out := make([]partition.TopicIDPartition, len(tps))
	for i, tp := range tps {
		out[i] = partition.TopicIDPartition(tp)
	}
	return out
}

// segmentFromCache answers a query for one segment from the cache, as
// fromCache does, with a copy of the segment found.
func (m *PgManager) segmentFromCache(tp TopicIDPartition, query func(p *partition.Partition) (partition.Ref, bool)) (seg RemoteLogSegmentMetadata, found, served bool, err error) {
	served, err = m.fromCache(tp, func(p *partition.Partition) {
		if r, ok := query(p); ok {
			seg, found = publicSegment(r), true
		}
	})
	return seg, found, served, err
}

// fromCache answers query from the cache when the manager caches tp.
// served is false when it does not (the caller asks the database); the
// error is ErrNotReady while tp loads.
func (m *PgManager) fromCache(tp TopicIDPartition, query func(p *partition.Partition)) (served bool, err error) {
	if m.cache == nil {
		return false, nil
	}
	consumed, loaded := m.cache.Read(partition.TopicIDPartition(tp), query)
	if consumed && !loaded {
		return true, newError(ErrNotReady, "partition %s is still loading", tp)
	}
	return consumed, nil
}

// uniqueSegmentIDConstraints are the constraints a taken segment id violates.
var uniqueSegmentIDConstraints = map[string]bool{
	"rlmm_segments_segment_id_key": true,
	"rlmm_segments_pkey":           true,
}

// AddRemoteLogSegmentMetadata adds a segment in COPY_SEGMENT_STARTED in one
// statement.
func (m *PgManager) AddRemoteLogSegmentMetadata(ctx context.Context, s RemoteLogSegmentMetadata) error {
	if err := validateAdd(s, m.opts.maxCustomMetadataBytes); err != nil {
		return err
	}
	epochs := s.sortedEpochs()
	params := db.SegmentAddParams{
		TopicID:           dbuuid.UUID(s.SegmentID.TopicIDPartition.TopicID),
		Partition:         s.SegmentID.TopicIDPartition.Partition,
		Topic:             s.SegmentID.TopicIDPartition.Topic,
		SegmentID:         dbuuid.UUID(s.SegmentID.ID),
		StartOffset:       s.StartOffset,
		EndOffset:         s.EndOffset,
		MaxTimestampMs:    s.MaxTimestampMs,
		BrokerID:          s.BrokerID,
		EventTimestampMs:  s.EventTimestampMs,
		SegmentSizeBytes:  s.SegmentSizeInBytes,
		CustomMetadata:    s.CustomMetadata,
		State:             int16(s.State),
		TxnIndexEmpty:     s.TxnIndexEmpty,
		Epochs:            make([]int32, len(epochs)),
		EpochFirstOffsets: make([]int64, len(epochs)),
		EpochLastOffsets:  make([]int64, len(epochs)),
	}
	for i, e := range epochs {
		first, last, _ := s.epochRange(e)
		params.Epochs[i], params.EpochFirstOffsets[i], params.EpochLastOffsets[i] = int32(e), first, last
	}
	params.MaxSegmentSpan = s.EndOffset - s.StartOffset
	added := func(row db.SegmentAddRow) {
		m.committed(s.SegmentID.TopicIDPartition, cache.OwnWrite{Order: row.AddedVersion, Xid: row.Xid}, func(d *cache.Data) {
			d.Put(newSegment(s.clone(), row.AddedVersion, 0, row.AddedVersion), row.Xid)
		})
	}
	add := func(ctx context.Context, tx db.DBTX) (db.SegmentAddRow, error) {
		return m.queries.SegmentAdd(ctx, tx, params)
	}
	afterward := func(row db.SegmentAddRow, err error) {
		if err == nil && row.AddedVersion >= 0 {
			added(row) // committed after the caller was answered
		}
	}
	row, err := runStatement(ctx, m.pool, add, afterward)
	for range 3 {
		if err != nil || row.AddedVersion >= 0 || row.DeleteState >= 0 {
			break
		}
		// The partition's first add raced another, which created the
		// partition row after this statement's snapshot: the next
		// statement sees it.
		row, err = runStatement(ctx, m.pool, add, afterward)
	}
	var pgErr *pgconn.PgError
	switch {
	case err == nil && row.AddedVersion >= 0:
		added(row)
		return nil
	case err == nil && row.DeleteState >= 0:
		return newError(ErrInvalidAdd, "segment %s: partition %s has a partition delete record", s.SegmentID.ID, s.SegmentID.TopicIDPartition)
	case err == nil:
		return newError(ErrIO, "add segment %s: the row of partition %s was created and could not be read, three times", s.SegmentID.ID, s.SegmentID.TopicIDPartition)
	case errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UniqueViolation && uniqueSegmentIDConstraints[pgErr.ConstraintName]:
		return newError(ErrInvalidAdd, "segment %s: segment id was already added", s.SegmentID.ID)
	}
	return ioError(ctx, err, "add segment %s", s.SegmentID.ID)
}

// UpdateRemoteLogSegmentMetadata moves a segment to u.State in one
// conditional UPDATE whose allowed from-states come from the state machine.
func (m *PgManager) UpdateRemoteLogSegmentMetadata(ctx context.Context, u RemoteLogSegmentMetadataUpdate) error {
	if err := validateUpdate(u, m.opts.maxCustomMetadataBytes); err != nil {
		return err
	}
	params := db.SegmentUpdateParams{
		TopicID:          dbuuid.UUID(u.SegmentID.TopicIDPartition.TopicID),
		Partition:        u.SegmentID.TopicIDPartition.Partition,
		SegmentID:        dbuuid.UUID(u.SegmentID.ID),
		State:            int16(u.State),
		BrokerID:         u.BrokerID,
		EventTimestampMs: u.EventTimestampMs,
		CustomMetadata:   u.CustomMetadata,
		Allowed:          stateCodes(AllowedSegmentFromStates(u.State)),
		Finishing:        u.State == CopySegmentFinished,
	}
	// The statement returns the segment's new row: the cache applies it
	// whether or not it had seen the segment, with no second read that a
	// caller's deadline could cut short.
	updated := func(row db.SegmentUpdateRow) {
		s := segmentFromUpdate(u, row)
		m.committed(u.SegmentID.TopicIDPartition, cache.OwnWrite{Order: row.WriteOrder, Xid: row.Xid}, func(d *cache.Data) {
			d.Put(s, row.Xid)
			if u.State == CopySegmentFinished {
				d.RaiseEpochEnds(s) // as EpochEndOffset counts the finished segments
			}
		})
	}
	update := func(ctx context.Context, tx db.DBTX) (db.SegmentUpdateRow, error) {
		return m.queries.SegmentUpdate(ctx, tx, params)
	}
	afterward := func(row db.SegmentUpdateRow, err error) {
		if err == nil && row.UpdatedVersion >= 0 {
			updated(row) // committed after the caller was answered
		}
	}
	row, err := runStatement(ctx, m.pool, update, afterward)
	for range maxRacedUpdateRetries {
		if err != nil || !refusedBeforeTheLock(row, params.Allowed) {
			break
		}
		// Another writer moved the segment, into a state this update may
		// leave, after this statement's snapshot and before its lock: the
		// statement decided on the state before (queries/segments.sql).
		// The next statement's snapshot sees the move.
		row, err = runStatement(ctx, m.pool, update, afterward)
	}
	switch {
	case err != nil:
		return ioError(ctx, err, "update segment %s to %s", u.SegmentID.ID, u.State)
	case row.UpdatedVersion >= 0:
		updated(row)
		return nil
	case row.CurrentState < 0 || RemotePartitionDeleteState(row.DeleteState) == DeletePartitionFinished:
		return newError(ErrSegmentNotFound, "segment %s in partition %s", u.SegmentID.ID, u.SegmentID.TopicIDPartition)
	case refusedBeforeTheLock(row, params.Allowed):
		return notAppliedError("update segment %s to %s: other writers changed its state %d times while it waited", u.SegmentID.ID, u.State, maxRacedUpdateRetries+1)
	}
	return segmentTransitionError(u.SegmentID.ID, RemoteLogSegmentState(row.CurrentState), u.State)
}

// maxRacedUpdateRetries bounds the statements an update runs again when
// it was refused on a state its segment had left. Each such refusal means
// that another writer changed the segment's state while the statement
// waited, and a segment changes state at most three times (COPY_STARTED to
// COPY_FINISHED to DELETE_STARTED to DELETE_FINISHED; the state guard
// refuses any other move), so three is enough but for a segment id purged
// and added again meanwhile.
const maxRacedUpdateRetries = 3

// refusedBeforeTheLock reports whether an update statement refused on the
// state its snapshot saw, while the state it found after the partition's
// lock would have let it through.
func refusedBeforeTheLock(row db.SegmentUpdateRow, allowed []int16) bool {
	return row.UpdatedVersion < 0 && row.CurrentState >= 0 &&
		RemotePartitionDeleteState(row.DeleteState) != DeletePartitionFinished &&
		slices.Contains(allowed, row.CurrentState)
}

// segmentFromUpdate is the segment as a successful update left it, from the
// row the update statement returned.
func segmentFromUpdate(u RemoteLogSegmentMetadataUpdate, row db.SegmentUpdateRow) *partition.Segment {
	tp := u.SegmentID.TopicIDPartition
	return cache.SegmentFromRow(db.RlmmSegment{
		TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition, SegmentID: dbuuid.UUID(u.SegmentID.ID), Topic: row.Topic,
		StartOffset: row.StartOffset, EndOffset: row.EndOffset, MaxTimestampMs: row.MaxTimestampMs,
		BrokerID: u.BrokerID, EventTimestampMs: u.EventTimestampMs, SegmentSizeBytes: row.SegmentSizeBytes,
		CustomMetadata: row.CustomMetadata, State: int16(u.State), TxnIndexEmpty: row.TxnIndexEmpty,
		Epochs: row.Epochs, EpochStartOffsets: row.EpochStartOffsets,
		AddedVersion: row.AddedVersion, FinishedVersion: pgtype.Int8{Int64: row.FinishedVersion, Valid: row.FinishedVersion >= 0},
		LastVersion: row.UpdatedVersion,
	})
}

// PutRemotePartitionDeleteMetadata records a partition-delete state in one
// conditional statement.
func (m *PgManager) PutRemotePartitionDeleteMetadata(ctx context.Context, d RemotePartitionDeleteMetadata) error {
	if err := validatePartitionDelete(d); err != nil {
		return err
	}
	tp := d.TopicIDPartition
	from, fromNone := allowedPartitionDeleteFromStates(d.State)
	allowed := stateCodes(from)
	put := func(ctx context.Context, tx db.DBTX) (partitionDeleteRow, error) {
		row, err := m.queries.PartitionDeleteUpdate(ctx, tx, db.PartitionDeleteUpdateParams{
			TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition,
			State: int16(d.State), BrokerID: d.BrokerID, EventTimestampMs: d.EventTimestampMs,
			Allowed: allowed,
		})
		return partitionDeleteRow(row), err
	}
	if fromNone {
		allowed = append(allowed, int16(partitionDeleteNone))
		put = func(ctx context.Context, tx db.DBTX) (partitionDeleteRow, error) {
			row, err := m.queries.PartitionDeleteUpsert(ctx, tx, db.PartitionDeleteUpsertParams{
				TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition, Topic: tp.Topic,
				State: int16(d.State), BrokerID: d.BrokerID, EventTimestampMs: d.EventTimestampMs,
				Allowed: allowed,
			})
			return partitionDeleteRow(row), err
		}
	}
	stored := func(w cache.OwnWrite) {
		m.committed(tp, w, func(cd *cache.Data) { cd.PutDeleteState(int8(d.State), w.Order) })
	}
	afterward := func(row partitionDeleteRow, err error) {
		if err == nil && row.DeleteVersion >= 0 {
			stored(row.ownWrite()) // committed after the caller was answered
		}
	}
	row, err := runStatement(ctx, m.pool, put, afterward)
	if err == nil && row.DeleteVersion < 0 && row.FoundState < int16(partitionDeleteNone) {
		// Refused by a partition row that a concurrent first write created
		// after the statement's snapshot: the next statement sees it, and
		// decides on the state its lock reads.
		row, err = runStatement(ctx, m.pool, put, afterward)
	}
	switch {
	case err != nil:
		return ioError(ctx, err, "put partition delete %s for %s", d.State, tp)
	case row.DeleteVersion >= 0:
		stored(row.ownWrite())
		return nil
	}
	return partitionDeleteTransitionError(tp, RemotePartitionDeleteState(max(row.FoundState, int16(partitionDeleteNone))), d.State)
}

// partitionDeleteRow is what both partition-delete statements return: the
// write's order (-1: refused), the state the lock found (-1: no record;
// -2: a row the statement's snapshot did not see) and the transaction id.
type partitionDeleteRow struct {
	DeleteVersion int64
	FoundState    int16
	Xid           uint64
}

func (r partitionDeleteRow) ownWrite() cache.OwnWrite {
	return cache.OwnWrite{Order: r.DeleteVersion, Xid: r.Xid}
}

// RemoteLogSegmentMetadata returns the finished segment holding offset for
// epoch, in one indexed statement.
func (m *PgManager) RemoteLogSegmentMetadata(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch, offset int64) (RemoteLogSegmentMetadata, bool, error) {
	if s, found, served, err := m.segmentFromCache(tp, func(p *partition.Partition) (partition.Ref, bool) { return p.Lookup(int32(epoch), offset) }); served {
		return s, found, err
	}
	if offset < 0 {
		return RemoteLogSegmentMetadata{}, false, nil // no segment holds a negative offset
	}
	row, found, err := readOptional(ctx, m, func(ctx context.Context, tx db.DBTX) (db.SegmentLookupRow, error) {
		return m.queries.SegmentLookup(ctx, tx, db.SegmentLookupParams{
			TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition, Epoch: int32(epoch), LookupOffset: offset,
		})
	}, "look up offset %d of epoch %d in %s", offset, epoch, tp)
	if !found || err != nil {
		return RemoteLogSegmentMetadata{}, false, err
	}
	return segmentFromRow((*apiRow)(&row)), true, nil
}

// HighestOffsetForEpoch returns the largest EndOffset of the finished
// segments that carry epoch.
func (m *PgManager) HighestOffsetForEpoch(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch) (int64, bool, error) {
	var highest int64
	var found bool
	if served, err := m.fromCache(tp, func(p *partition.Partition) { highest, found = p.Highest(int32(epoch)) }); served {
		return highest, found, err
	}
	return readOptional(ctx, m, func(ctx context.Context, tx db.DBTX) (int64, error) {
		return m.queries.SegmentHighestOffset(ctx, tx, db.SegmentHighestOffsetParams{
			TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition, Epoch: int32(epoch),
		})
	}, "highest offset of epoch %d in %s", epoch, tp)
}

// ListRemoteLogSegments returns every segment of tp that is not forgotten,
// ordered by StartOffset, ties by the order they were added.
func (m *PgManager) ListRemoteLogSegments(ctx context.Context, tp TopicIDPartition) ([]RemoteLogSegmentMetadata, error) {
	var list []RemoteLogSegmentMetadata
	if served, err := m.fromCache(tp, func(p *partition.Partition) { list = publicSegments(p.List(partition.All)) }); served {
		return list, err
	}
	out, err := runStatement(ctx, m.reader, func(ctx context.Context, tx db.DBTX) ([]RemoteLogSegmentMetadata, error) {
		return scanSegments(ctx, tx, func(rec db.DBTX) error {
			_, err := m.queries.SegmentList(ctx, rec, db.SegmentListParams{TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition})
			return err
		}, segmentFromRow)
	}, nil)
	if err != nil {
		return nil, ioError(ctx, err, "list segments of %s", tp)
	}
	return out, nil
}

// ListRemoteLogSegmentsByEpoch is ListRemoteLogSegments restricted to the
// segments that carry epoch.
func (m *PgManager) ListRemoteLogSegmentsByEpoch(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch) ([]RemoteLogSegmentMetadata, error) {
	var list []RemoteLogSegmentMetadata
	if served, err := m.fromCache(tp, func(p *partition.Partition) { list = publicSegments(p.List(carries(epoch))) }); served {
		return list, err
	}
	out, err := runStatement(ctx, m.reader, func(ctx context.Context, tx db.DBTX) ([]RemoteLogSegmentMetadata, error) {
		return scanSegments(ctx, tx, func(rec db.DBTX) error {
			_, err := m.queries.SegmentListByEpoch(ctx, rec, db.SegmentListByEpochParams{
				TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition, Epoch: int32(epoch),
			})
			return err
		}, segmentFromRow)
	}, nil)
	if err != nil {
		return nil, ioError(ctx, err, "list segments of epoch %d in %s", epoch, tp)
	}
	return out, nil
}

// CaughtUp reports whether a query that follows sees every write for tp
// that the primary had committed when the call began. Reading from the
// primary, that is true once the primary answers (one round trip).
//
// With a replica, two round trips, the replica first. In one statement
// (ReplicaSnapshot) the replica gives its snapshot, the transaction ids of
// tp's segment rows that snapshot sees written between its xmin and its
// xmax, tp's delete_version and the data's generation. Then the primary
// (PartitionReplicaBehind) says whether tp has a segment row written by a
// transaction that snapshot did not see (at or past its xmax, or between
// xmin and xmax and not among those ids), another delete_version, rows
// purged at or past its xmin, or another generation: true when none. Each
// is a primary-key probe or a short range of the change feed's index,
// whatever the partition's size. It is exact: a write to tp committed
// before the call either had been replayed when the replica took its
// snapshot, and every later query there sees it, or it left a row version
// on the primary that the snapshot did not see (a write overwritten since
// left one of a later write, which committed after it: a partition's
// writes hold its row's lock in turn). A hot standby's snapshot lists no
// running transaction (pg_current_snapshot() has an empty xip there), so
// what it saw between xmin and xmax comes from tp's rows themselves.
// Writes to other partitions change nothing of the answer, nor do
// transactions running on the primary, except that after a purge of tp
// the answer waits for the transactions older than the purge to end.
//
// With the cache, true when the cached partition holds every write
// committed since the snapshot it last read in (one round trip);
// ErrNotReady while it loads; false for a partition the manager does not
// consume.
func (m *PgManager) CaughtUp(ctx context.Context, tp TopicIDPartition) (bool, error) {
	if m.cache != nil {
		after, consumed, loaded := m.cache.Cursor(partition.TopicIDPartition(tp))
		switch {
		case !consumed:
			return false, nil
		case !loaded:
			return false, newError(ErrNotReady, "partition %s is still loading", tp)
		}
		// Through runStatement, as every statement: a caller's deadline
		// returns at once and does not cost a plain pool its connection.
		row, err := runStatement(ctx, m.pool, func(ctx context.Context, tx db.DBTX) (db.PartitionCacheCheckRow, error) {
			return m.queries.PartitionCacheCheck(ctx, tx, db.PartitionCacheCheckParams{
				TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition, After: after.Text(),
			})
		}, nil)
		if err != nil {
			return false, ioError(ctx, err, "read the changes of %s on the primary", tp)
		}
		if m.cache.Holds(partition.TopicIDPartition(tp), after, row) {
			return true, nil
		}
		m.cache.Wake(partition.TopicIDPartition(tp)) // a notification was missed or is in flight, or the data was reset
		return false, nil
	}
	if m.reader == m.pool {
		if _, err := runStatement(ctx, m.pool, m.queries.PrimaryPosition, nil); err != nil {
			return false, ioError(ctx, err, "reach the primary")
		}
		return true, nil
	}
	replica, err := runStatement(ctx, m.reader, func(ctx context.Context, tx db.DBTX) (db.ReplicaSnapshotRow, error) {
		return m.queries.ReplicaSnapshot(ctx, tx, db.ReplicaSnapshotParams{TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition})
	}, nil)
	if err != nil {
		return false, ioError(ctx, err, "read what the replica has of %s", tp)
	}
	behind, err := runStatement(ctx, m.pool, func(ctx context.Context, tx db.DBTX) (bool, error) {
		return m.queries.PartitionReplicaBehind(ctx, tx, db.PartitionReplicaBehindParams{
			TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition, Snapshot: replica.Snapshot, Seen: replica.Seen,
			DeleteVersion: replica.DeleteVersion, Generation: replica.Generation,
		})
	}, nil)
	if err != nil {
		return false, ioError(ctx, err, "compare the replica's %s with the primary's", tp)
	}
	return !behind, nil
}

// RemoteLogSize is the sum of SegmentSizeInBytes over
// ListRemoteLogSegmentsByEpoch(tp, epoch), summed by the database.
func (m *PgManager) RemoteLogSize(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch) (int64, error) {
	var list []RemoteLogSegmentMetadata
	if served, err := m.fromCache(tp, func(p *partition.Partition) { list = publicSegments(p.List(carries(epoch))) }); served {
		return totalSize(list), err
	}
	size, err := runStatement(ctx, m.reader, func(ctx context.Context, tx db.DBTX) (int64, error) {
		return m.queries.SegmentSizeByEpoch(ctx, tx, db.SegmentSizeByEpochParams{
			TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition, Epoch: int32(epoch),
		})
	}, nil)
	if err != nil {
		return 0, ioError(ctx, err, "remote log size of epoch %d in %s", epoch, tp)
	}
	return size, nil
}

// NextSegmentWithTxnIndex walks the lookups of epoch from offset in one
// recursive statement and returns the first segment with a transaction index.
func (m *PgManager) NextSegmentWithTxnIndex(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch, offset int64) (RemoteLogSegmentMetadata, bool, error) {
	if s, found, served, err := m.segmentFromCache(tp, func(p *partition.Partition) (partition.Ref, bool) { return p.NextWithTxnIndex(int32(epoch), offset) }); served {
		return s, found, err
	}
	if offset < 0 {
		return RemoteLogSegmentMetadata{}, false, nil // the walk's first lookup misses
	}
	row, found, err := readOptional(ctx, m, func(ctx context.Context, tx db.DBTX) (db.SegmentNextWithTxnIndexRow, error) {
		return m.queries.SegmentNextWithTxnIndex(ctx, tx, db.SegmentNextWithTxnIndexParams{
			TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition, Epoch: int32(epoch), LookupOffset: offset,
		})
	}, "next segment with a transaction index from offset %d of epoch %d in %s", offset, epoch, tp)
	if !found || err != nil {
		return RemoteLogSegmentMetadata{}, false, err
	}
	return segmentFromRow((*apiRow)(&row)), true, nil
}

// FirstSegmentForTimestamp returns the first COPY_SEGMENT_FINISHED segment
// carrying epoch, in the order of ListRemoteLogSegmentsByEpoch (StartOffset,
// ties by the order added), whose MaxTimestampMs >= timestampMs and
// EndOffset >= startingOffset: the segment whose time index a broker reads to
// answer ListOffsets by timestamp. None: (zero, false, nil). One indexed
// statement that walks the epoch's finished segments from near
// startingOffset (queries/epochs.sql).
func (m *PgManager) FirstSegmentForTimestamp(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch, timestampMs, startingOffset int64) (RemoteLogSegmentMetadata, bool, error) {
	if s, found, served, err := m.segmentFromCache(tp, func(p *partition.Partition) (partition.Ref, bool) {
		return p.FirstForTimestamp(int32(epoch), timestampMs, startingOffset)
	}); served {
		return s, found, err
	}
	// Every EndOffset is >= 0, so a negative startingOffset filters nothing
	// more than 0 does (and the walk's bound cannot overflow).
	startingOffset = max(startingOffset, 0)
	row, found, err := readOptional(ctx, m, func(ctx context.Context, tx db.DBTX) (db.SegmentFirstForTimestampRow, error) {
		return m.queries.SegmentFirstForTimestamp(ctx, tx, db.SegmentFirstForTimestampParams{
			TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition, Epoch: int32(epoch),
			TimestampMs: timestampMs, StartingOffset: startingOffset,
		})
	}, "first segment of epoch %d in %s with timestamp >= %d from offset %d", epoch, tp, timestampMs, startingOffset)
	if !found || err != nil {
		return RemoteLogSegmentMetadata{}, false, err
	}
	return segmentFromRow((*apiRow)(&row)), true, nil
}

// EpochEndOffset is Kafka's meaning of "highest offset for epoch", for
// brokers whose copy task resumes from it: the largest offset o such that the
// range of epoch in some segment that reached COPY_SEGMENT_FINISHED contains
// o. Segments deleted since still count (deletes never lower it);
// DELETE_PARTITION_FINISHED forgets it. None: (0, false, nil). One index
// descent to the largest end among the finished epoch rows, and a
// primary-key read of the purged segments' (rlmm_epoch_ends).
func (m *PgManager) EpochEndOffset(ctx context.Context, tp TopicIDPartition, epoch LeaderEpoch) (int64, bool, error) {
	var end int64
	var found bool
	if served, err := m.fromCache(tp, func(p *partition.Partition) { end, found = p.EpochEnd(int32(epoch)) }); served {
		return end, found, err
	}
	return readOptional(ctx, m, func(ctx context.Context, tx db.DBTX) (int64, error) {
		return m.queries.EpochEndOffset(ctx, tx, db.EpochEndOffsetParams{
			TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition, Epoch: int32(epoch),
		})
	}, "end offset of epoch %d in %s", epoch, tp)
}

// PartitionDeleteState implements PartitionDeleteStates: from the cache when
// the manager caches tp (no round trip), else one primary-key read of the
// partition's row on the reader pool.
func (m *PgManager) PartitionDeleteState(ctx context.Context, tp TopicIDPartition) (RemotePartitionDeleteState, bool, error) {
	state := partitionDeleteNone
	if served, err := m.fromCache(tp, func(p *partition.Partition) {
		if p != nil {
			state = RemotePartitionDeleteState(p.DeleteState)
		}
	}); served {
		return state, err == nil && state != partitionDeleteNone, err
	}
	row, found, err := readOptional(ctx, m, func(ctx context.Context, tx db.DBTX) (db.RlmmPartition, error) {
		return m.queries.PartitionGet(ctx, tx, db.PartitionGetParams{TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition})
	}, "read the partition-delete state of %s", tp)
	if err != nil || !found || !row.DeleteState.Valid {
		return partitionDeleteNone, false, err
	}
	return RemotePartitionDeleteState(row.DeleteState.Int16), true, nil
}

// PurgeForgotten deletes, in bounded batches, every segment forgotten for
// longer than olderThan (with all it stored), and takes the delete record of
// each partition in DELETE_PARTITION_FINISHED for longer than that once its
// segments are gone, so that adds to it work again. Returns the number of
// segments deleted. The age is measured on the database's clock.
//
// Each round is one call of the SQL function rlmm_purge_round (which DBAs
// call from psql too, through rlmm_purge), bounded by the batch size, that locks its rows with
// SKIP LOCKED: several managers may purge at once, none deletes what
// another already did, and none waits on another (or on a broker's write);
// a row one of them skipped
// is purged by the one holding it, or by the next purge. Purging changes no
// query's answer. A purged segment's id may be added again.
//
// A negative olderThan is an error.
func (m *PgManager) PurgeForgotten(ctx context.Context, olderThan time.Duration) (int64, error) {
	if olderThan < 0 {
		return 0, negativeAge(olderThan)
	}
	olderThanUs := olderThan.Microseconds()
	batch := m.opts.batchSize()
	var total int64
	for {
		r, err := m.queries.PurgeRound(ctx, m.pool, db.PurgeRoundParams{OlderThanUs: olderThanUs, BatchSize: batch})
		if err != nil {
			return total, ioError(ctx, err, "purge (%d segments purged before)", total)
		}
		m.purged.Add(r.Segments)
		total += r.Segments
		if m.cache != nil {
			// Partitions whose delete record the round took: their
			// delete_version moved, and the round notified it; this
			// manager's cache applies it at once.
			for i, id := range r.TopicIds {
				tp := partition.TopicIDPartition{TopicID: uuid.UUID(id), Topic: r.Topics[i], Partition: r.Partitions[i]}
				version := r.Versions[i]
				m.cache.Applied(tp, cache.OwnWrite{Order: version, Xid: r.Xid}, func(d *cache.Data) { d.Purged(version) })
			}
		}
		// Stop when a round found nothing: a batch that deleted fewer than
		// it may have skipped rows another purge holds, and that purge
		// goes on.
		if r.Segments == 0 && len(r.TopicIds) == 0 {
			m.lastPurge.Store(time.Now().UnixNano())
			return total, nil
		}
	}
}

// PurgedSegments is how many segments this manager has purged, in the
// background and through PurgeForgotten: Instrument exports it as
// rlmm_purged_segments_total.
func (m *PgManager) PurgedSegments() int64 { return m.purged.Load() }

// LastPurge is when a purge (the background one or PurgeForgotten) last
// went through to its end without an error, on this process's clock; the
// zero time before the first. Instrument exports it as
// rlmm_purge_last_success_timestamp_seconds, so that an alert sees a purge
// that keeps failing, or no longer runs.
func (m *PgManager) LastPurge() time.Time {
	ns := m.lastPurge.Load()
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// readOptional runs a read of at most one row on the reader pool: no row is
// (zero, false, nil), and any other failure an ErrIO described by format.
func readOptional[T any](ctx context.Context, m *PgManager, read func(context.Context, db.DBTX) (T, error), format string, args ...any) (T, bool, error) {
	v, err := runStatement(ctx, m.reader, read, nil)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		var zero T
		return zero, false, nil
	case err != nil:
		var zero T
		return zero, false, ioError(ctx, err, format, args...)
	}
	return v, true, nil
}
