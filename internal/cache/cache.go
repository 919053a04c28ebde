// Package cache is PgManager's cache (WithCache): the partitions a manager
// consumes, held in memory as internal/partition's reference partitions and
// kept fresh from the database's change feed (docs/SCALING.md, "How the
// cache stays fresh"): the listener of LISTEN/NOTIFY, the notifier that
// tells other managers' caches of this manager's writes, the snapshots the
// change feed resumes from, and the side connection of the manager's
// background statements.
//
// The root package builds a Cache from a Config (what the cache needs of
// the manager: its pool, the generated queries, its side connection and
// its logging), and calls Assign, Stop, Applied, Read, Cursor, Holds, Wake
// and Close. The package does not import the root package.
package cache

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/krabka/remotestorage/db"
	"github.com/krabka/remotestorage/internal/backoff"
	"github.com/krabka/remotestorage/internal/dbuuid"
	"github.com/krabka/remotestorage/internal/partition"
)

// Cache holds the partitions a PgManager consumes, and keeps them fresh
// as docs/SCALING.md ("How the cache stays fresh") describes: a cached
// partition remembers the snapshot it last read in, and catches up by
// reading, in one newer snapshot, the partition row and the segments whose
// last_xid the old one does not see; notifications only say when. A cache
// whose snapshot may not see the partition's vanished_xid, or loaded at
// another data generation, reloads the partition instead (rows a DBA or a
// purge deleted leave nothing to read).
type Cache struct {
	cfg Config

	mu         sync.RWMutex
	partitions map[partition.Key]*cachedPartition

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	loaders chan struct{} // a slot per load or catch-up running (WithCacheLoaders)

	test testHooks
}

// Config is what the cache needs of its manager.
type Config struct {
	Pool    *pgxpool.Pool // the primary: loads and catch-ups read there
	Queries *db.Queries   // the generated statements
	Side    *SideConn     // the manager's connection for background statements: the poll
	// Warn and Info log what the background work could not do, and that
	// it recovered.
	Warn, Info func(msg string, args ...any)
	// Logger is WithLogger's logger, nil without one: the listener's
	// probe warns there (or through slog's default).
	Logger *slog.Logger
	// ListenerConnConfig is WithListenerConnConfig's; nil: the listener
	// connects as the pool does.
	ListenerConnConfig *pgx.ConnConfig
	PollInterval       time.Duration // between two polls; 0: no poll
	Loaders            int           // loads and catch-ups at once; 0: half the pool's MaxConns, at least 1
}

// OwnWrite identifies a write this manager committed: its write order
// (rlmm_versions, which its notification carries) and its transaction id
// (which tells a cache's snapshot whether it holds the write).
type OwnWrite struct {
	Order int64
	Xid   uint64
}

// testHooks are the cache's hooks and signals for tests (cache_testhooks.go).
// Each does nothing unless a test sets or initialises it.
type testHooks struct {
	signals TestSignals

	listening         atomic.Bool                                      // the listener is connected and listening
	connections       atomic.Int64                                     // how many times the listener has listened
	dropNotifications atomic.Bool                                      // the listener ignores every notification
	beforeCatchUp     func(tp partition.TopicIDPartition, loaded bool) // runs before each catch-up; guarded by Cache.mu
	afterRead         func(tp partition.TopicIDPartition, reload bool) // runs after a catch-up's reads, before it applies them; guarded by Cache.mu
}

// cachedPartition is one consumed partition. data is nil until loaded.
type cachedPartition struct {
	tp         partition.TopicIDPartition
	data       *Data
	generation int64            // the data's generation data was loaded at
	after      Snapshot         // the snapshot data was last brought up to: the change feed resumes there
	reloading  bool             // a reload is reading: this manager's writes also go to pending
	pending    []pendingWrite   // this manager's writes made while loading or reloading
	own        map[int64]uint64 // this manager's writes applied, by write order (-> transaction id), until heard back or seen by after
	woken      chan struct{}    // capacity 1: a pending wake-up of the follower
	cancel     context.CancelFunc
}

// pendingWrite is a write this manager made in transaction xid while its
// partition (re)loaded: applied after the load when the load's snapshot
// does not see it.
type pendingWrite struct {
	xid   uint64
	write func(d *Data)
}

// New starts a cache: its listener, and its poll when cfg.PollInterval is
// positive. Close stops them.
func New(cfg Config) *Cache {
	ctx, cancel := context.WithCancel(context.Background())
	c := &Cache{
		cfg:        cfg,
		partitions: make(map[partition.Key]*cachedPartition),
		ctx:        ctx,
		cancel:     cancel,
		loaders:    make(chan struct{}, loaders(cfg)),
	}
	c.wg.Go(c.listen)
	if cfg.PollInterval > 0 {
		c.wg.Go(func() { c.pollEvery(cfg.PollInterval) })
	}
	return c
}

// loaders is how many loads and catch-ups run at once.
func loaders(cfg Config) int {
	if cfg.Loaders > 0 {
		return cfg.Loaders
	}
	return max(1, int(cfg.Pool.Config().MaxConns)/2)
}

// pollEvery runs poll each interval until the manager closes.
func (c *Cache) pollEvery(interval time.Duration) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-ticker.C:
		}
		if err := c.poll(); err != nil && c.ctx.Err() == nil {
			c.cfg.Warn("cache poll failed", "error", err)
		}
	}
}

// poll asks, in one statement, which loaded partitions have writes since
// their snapshots, and wakes their followers.
func (c *Cache) poll() error {
	var params db.PartitionsBehindParams
	c.mu.RLock()
	for _, cp := range c.partitions {
		if cp.data != nil {
			params.TopicIds = append(params.TopicIds, cp.tp.TopicID.String())
			params.Partitions = append(params.Partitions, cp.tp.Partition)
			params.Snapshots = append(params.Snapshots, cp.after.Text())
			params.DeleteVersions = append(params.DeleteVersions, cp.data.DeleteVersion())
		}
	}
	c.mu.RUnlock()
	if len(params.TopicIds) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	defer cancel()
	var rows []db.PartitionsBehindRow
	err := c.cfg.Side.Do(ctx, func(conn *pgx.Conn) (err error) {
		rows, err = c.cfg.Queries.PartitionsBehind(ctx, conn, params)
		return err
	})
	if err != nil {
		return err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, r := range rows {
		// Behind, or loaded at another generation: a reset the catch-up
		// turns into a reload.
		if cp := c.partitions[partition.Key{TopicID: uuid.UUID(r.TopicID), Partition: r.Partition}]; cp != nil && cp.data != nil &&
			(r.Behind || cp.generation != r.Generation) {
			cp.wake()
		}
	}
	return nil
}

// Close stops the cache's listener, poll, loads and catch-ups, and waits
// for them.
func (c *Cache) Close() {
	c.cancel()
	c.wg.Wait()
}

// Assign starts loading the partitions not yet consumed; a partition
// assigned twice is not reloaded.
func (c *Cache) Assign(tps []partition.TopicIDPartition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, tp := range tps {
		key := partition.KeyOf(tp)
		if c.partitions[key] != nil {
			continue // assigned twice: not reloaded
		}
		ctx, cancel := context.WithCancel(c.ctx)
		cp := &cachedPartition{tp: tp, own: make(map[int64]uint64), woken: make(chan struct{}, 1), cancel: cancel}
		c.partitions[key] = cp
		cp.woken <- struct{}{} // the load
		c.wg.Go(func() { c.follow(ctx, cp) })
	}
}

// Stop drops the partitions.
func (c *Cache) Stop(tps []partition.TopicIDPartition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, tp := range tps {
		if cp := c.partitions[partition.KeyOf(tp)]; cp != nil {
			cp.cancel()
			delete(c.partitions, partition.KeyOf(tp))
		}
	}
}

// wake asks the partition's follower to catch up, without waiting.
func (cp *cachedPartition) wake() {
	select {
	case cp.woken <- struct{}{}:
	default: // one is pending already
	}
}

// follow loads the partition, then catches it up each time it is woken,
// until the partition is stopped or the manager closed. Failed fetches are
// retried with backoff.
func (c *Cache) follow(ctx context.Context, cp *cachedPartition) {
	retry := backoff.New()
	for {
		select {
		case <-ctx.Done():
			return
		case <-cp.woken:
		}
		select {
		case <-ctx.Done():
			return
		case c.loaders <- struct{}{}:
		}
		err := c.catchUp(ctx, cp)
		<-c.loaders
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			cp.wake()
			select {
			case <-ctx.Done():
				return
			case <-time.After(retry.Next()):
			}
			continue
		}
		retry.Reset()
	}
}

// catchUp reads the partition's changes since its snapshot, in one newer
// snapshot, and applies them; or reloads the partition when rows vanished
// that the change feed cannot show.
func (c *Cache) catchUp(ctx context.Context, cp *cachedPartition) error {
	// While a reload reads, this manager's writes also queue in pending,
	// for those the reload's snapshot may miss.
	startReload := func() {
		c.mu.Lock()
		cp.reloading = true
		c.mu.Unlock()
	}
	c.mu.RLock()
	var after *Snapshot
	generation := cp.generation
	if cp.data != nil {
		cursor := cp.after
		after = &cursor
	}
	hook, afterRead, loaded := c.test.beforeCatchUp, c.test.afterRead, cp.data != nil
	c.mu.RUnlock()
	if hook != nil {
		hook(cp.tp, loaded)
	}
	reload := false
	read, err := c.readChanges(ctx, cp.tp, after)
	// Transaction ids that went back (a failover to a standby that lacked
	// the old primary's last transactions) would let a snapshot of the old
	// server see writes it never read: reload.
	if err == nil && loaded && (read.generation != generation || vanishedSince(read.partition.VanishedXid, *after) || read.snapshot.wentBack(*after)) {
		reload = true
		startReload()
		read, err = c.readChanges(ctx, cp.tp, nil)
	}
	if err != nil {
		if reload {
			c.mu.Lock()
			cp.reloading, cp.pending = false, nil
			c.mu.Unlock()
		}
		return err
	}
	if afterRead != nil {
		afterRead(cp.tp, reload)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.partitions[partition.KeyOf(cp.tp)] != cp {
		return nil // stopped meanwhile
	}
	if cp.data == nil || reload {
		cp.data, cp.generation, cp.reloading = newData(), read.generation, false
	}
	p := cp.data
	if p.Len() == 0 {
		p.Reserve(len(read.segments)) // a load: no spare capacity
	}
	// A row older than what the cache holds (this manager's own write,
	// applied meanwhile) is dropped: put keeps the newest write of each
	// segment, and the newest delete record. The partition copies each
	// segment: one serves every row.
	var s partition.Segment
	for _, r := range read.segments {
		fillSegment(&s, r)
		p.Put(&s, r.LastXid)
		if s.FinishedVersion > 0 {
			p.RaiseEpochEnds(&s) // EpochEndOffset counts every segment that finished
		}
	}
	for _, r := range read.epochEnds {
		p.RaiseEpochEnd(r.Epoch, r.EndOffset)
	}
	state := partition.DeleteNone
	if read.partition.DeleteState.Valid {
		state = int8(read.partition.DeleteState.Int16)
	}
	p.PutDeleteState(state, read.partition.DeleteVersion)
	cp.after = read.snapshot
	// Writes this manager made while the partition (re)loaded that the
	// load's snapshot does not see committed after it: newer than anything
	// it read of their segments.
	for _, w := range cp.pending {
		if !read.snapshot.sees(w.xid) {
			w.write(p)
		}
	}
	cp.pending = nil
	p.pruneForgotten(read.snapshot)
	for order, xid := range cp.own {
		if read.snapshot.sees(xid) {
			delete(cp.own, order) // no longer needed to tell the notification apart
		}
	}
	p.Changed()
	c.test.signals.CaughtUp.Signal(cp.tp)
	return nil
}

// changes is what a load or a catch-up read, in one snapshot: the
// partition row, the segments written since the cache's snapshot (a load:
// the live ones), and, for a load, the epoch ends of the segments it does
// not hold (a catch-up is given every segment that finished since).
type changes struct {
	partition  db.RlmmPartition
	generation int64    // the data's (rlmm_data_generation)
	snapshot   Snapshot // the one they were read in
	segments   []db.RlmmSegment
	epochEnds  []db.EpochEndsLoadRow
}

// readChanges reads the partition's changes since snapshot after (nil: a
// load). A catch-up that brings segments is one statement, one round trip
// (PartitionCatchUp); a load, or a catch-up of a partition row that moved
// alone, reads in one REPEATABLE READ transaction.
func (c *Cache) readChanges(ctx context.Context, tp partition.TopicIDPartition, after *Snapshot) (changes, error) {
	if after != nil {
		rows, err := c.cfg.Queries.PartitionCatchUp(ctx, c.cfg.Pool, db.PartitionCatchUpParams{
			TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition, After: after.Text(),
		})
		if err != nil {
			return changes{}, err
		}
		if len(rows) > 0 {
			read := changes{
				partition: db.RlmmPartition{
					DeleteState: rows[0].PartitionDeleteState, DeleteVersion: rows[0].PartitionDeleteVersion,
					VanishedXid: rows[0].PartitionVanishedXid,
				},
				generation: rows[0].DataGeneration,
			}
			if read.snapshot, err = parseSnapshot(rows[0].Snapshot); err != nil {
				return changes{}, err
			}
			for _, r := range rows {
				read.segments = append(read.segments, r.RlmmSegment)
			}
			return read, nil
		}
	}

	tx, err := c.cfg.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return changes{}, err
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // read-only
	var read changes
	generation, err := c.cfg.Queries.DataGeneration(ctx, tx) // the first statement: the transaction's snapshot
	if err != nil {
		return changes{}, err
	}
	read.generation = generation.Generation
	if read.snapshot, err = parseSnapshot(generation.Snapshot); err != nil {
		return changes{}, err
	}
	key := db.PartitionGetParams{TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition}
	read.partition, err = c.cfg.Queries.PartitionGet(ctx, tx, key)
	if errors.Is(err, pgx.ErrNoRows) {
		read.partition, err = db.RlmmPartition{}, nil // never written to
	}
	if err != nil {
		return changes{}, err
	}
	if after == nil {
		// The load: the live segments only, whatever the partition's
		// history.
		var live []db.PartitionLoadRow
		live, err = c.cfg.Queries.PartitionLoad(ctx, tx, db.PartitionLoadParams{TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition})
		for _, r := range live {
			read.segments = append(read.segments, r.RlmmSegment)
		}
		if err == nil {
			read.epochEnds, err = c.readEpochEnds(ctx, tx, tp) // EpochEndOffset outlives deleted segments
		}
	} else {
		var rows []db.PartitionChangesRow
		rows, err = c.cfg.Queries.PartitionChanges(ctx, tx, db.PartitionChangesParams{
			TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition, After: after.Text(),
		})
		for _, r := range rows {
			read.segments = append(read.segments, r.RlmmSegment)
		}
	}
	if err != nil {
		return changes{}, err
	}
	return read, tx.Commit(ctx)
}

// SegmentFromRow builds the segment of row r, for a partition to store.
// The root package builds the segment an update returned with it too.
func SegmentFromRow(r db.RlmmSegment) *partition.Segment {
	var s partition.Segment
	fillSegment(&s, r)
	return &s
}

// fillSegment makes s the segment of row r, reusing s.Epochs' array.
func fillSegment(s *partition.Segment, r db.RlmmSegment) {
	*s = partition.Segment{
		TP: partition.TopicIDPartition{TopicID: uuid.UUID(r.TopicID), Topic: r.Topic, Partition: r.Partition}, ID: uuid.UUID(r.SegmentID),
		Start: r.StartOffset, End: r.EndOffset, MaxTimestampMs: r.MaxTimestampMs, EventTimestampMs: r.EventTimestampMs,
		BrokerID: r.BrokerID, SizeInBytes: r.SegmentSizeBytes, CustomMetadata: r.CustomMetadata,
		State: int8(r.State), TxnIndexEmpty: r.TxnIndexEmpty,
		AddedVersion: r.AddedVersion, FinishedVersion: r.FinishedVersion.Int64, LastVersion: r.LastVersion,
		Epochs: s.Epochs[:0],
	}
	for i, e := range r.Epochs {
		s.Epochs = append(s.Epochs, partition.EpochStart{Epoch: e, Start: r.EpochStartOffsets[i]})
	}
	slices.SortFunc(s.Epochs, func(a, b partition.EpochStart) int { return cmp.Compare(a.Epoch, b.Epoch) })
}

// readEpochEnds reads, in a load's snapshot tx, the partition's epoch ends
// that its live segments do not give: the purged and the forgotten
// segments' (readChanges).
func (c *Cache) readEpochEnds(ctx context.Context, tx pgx.Tx, tp partition.TopicIDPartition) ([]db.EpochEndsLoadRow, error) {
	return c.cfg.Queries.EpochEndsLoad(ctx, tx, db.EpochEndsLoadParams{TopicID: dbuuid.UUID(tp.TopicID), Partition: tp.Partition})
}

// Applied records a write w this manager made to the partition, so the
// write is in the cache before the call returns: write applies it from what
// the write statement returned, never from a second read. The write order
// is kept until the write's notification comes back, which then wakes
// nothing, or until the cache's snapshot sees the write.
func (c *Cache) Applied(tp partition.TopicIDPartition, w OwnWrite, write func(d *Data)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cp := c.partitions[partition.KeyOf(tp)]
	if cp == nil {
		return // not consumed
	}
	if cp.data == nil || cp.reloading {
		cp.pending = append(cp.pending, pendingWrite{xid: w.Xid, write: write})
		if cp.data == nil {
			return
		}
	}
	cp.own[w.Order] = w.Xid
	write(cp.data)
	cp.data.Changed()
}

// Read runs query on the partition's cached data under the read lock.
// consumed is false when the manager does not consume the partition (the
// caller asks the database), loaded false while it is loading (query did
// not run).
func (c *Cache) Read(tp partition.TopicIDPartition, query func(p *partition.Partition)) (consumed, loaded bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	cp := c.partitions[partition.KeyOf(tp)]
	if cp == nil {
		return false, false
	}
	if cp.data == nil {
		return true, false
	}
	query(cp.data.Partition)
	return true, true
}

// Cursor returns the snapshot the partition's cache was last brought up
// to; loaded is false while it loads, consumed false when the manager does
// not consume it.
func (c *Cache) Cursor(tp partition.TopicIDPartition) (after Snapshot, consumed, loaded bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	cp := c.partitions[partition.KeyOf(tp)]
	if cp == nil {
		return Snapshot{}, false, false
	}
	if cp.data == nil {
		return Snapshot{}, true, false
	}
	return cp.after, true, true
}

// Holds reports whether the cached partition holds every write that row
// (PartitionCacheCheck since snapshot after) found committed: loaded at the
// data's generation, no rows vanished since, the delete record and each
// segment written since held at least as new.
func (c *Cache) Holds(tp partition.TopicIDPartition, after Snapshot, row db.PartitionCacheCheckRow) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	cp := c.partitions[partition.KeyOf(tp)]
	if cp == nil || cp.data == nil || cp.generation != row.Generation ||
		vanishedSince(row.VanishedXid, after) || row.DeleteVersion > cp.data.DeleteVersion() {
		return false
	}
	for i, id := range row.SegmentIds {
		if !cp.data.holdsWrite(uuid.UUID(id), row.LastVersions[i]) {
			return false
		}
	}
	return true
}

// heard acts on the notification of the write of order to partition key.
// This manager's own write is in its cache already; any other wakes the
// follower, which reads what its snapshot does not see.
func (c *Cache) heard(key partition.Key, order int64) {
	c.mu.RLock()
	cp := c.partitions[key]
	own := cp.ownWrite(order)
	if cp != nil && (!own || cp.data == nil || cp.reloading) {
		cp.wake()
		own = false
	}
	c.mu.RUnlock()
	if own {
		c.mu.Lock()
		delete(cp.own, order) // heard back: no longer needed
		c.mu.Unlock()
	}
}

// wakeAll asks every follower to catch up, without waiting. Callers hold
// c.mu.
func (c *Cache) wakeAll() {
	for _, cp := range c.partitions {
		cp.wake()
	}
}

// ownWrite reports whether order is one of this manager's writes that the
// cache applied (false for a nil partition). Callers hold c.mu.
func (cp *cachedPartition) ownWrite(order int64) bool {
	if cp == nil {
		return false
	}
	_, own := cp.own[order]
	return own
}

// discardWake discards a pending wake-up of the follower, if any.
func (cp *cachedPartition) discardWake() {
	select {
	case <-cp.woken:
	default:
	}
}

// holdsWrite reports whether the partition is loaded and holds the write
// of segment id at lastVersion, or a newer one. Callers hold c.mu.
func (cp *cachedPartition) holdsWrite(id uuid.UUID, lastVersion int64) bool {
	return cp != nil && cp.data != nil && cp.data.holdsWrite(id, lastVersion)
}

// Wake asks the follower of tp, if consumed, to catch up, without waiting.
func (c *Cache) Wake(tp partition.TopicIDPartition) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if cp := c.partitions[partition.KeyOf(tp)]; cp != nil {
		cp.wake()
	}
}
