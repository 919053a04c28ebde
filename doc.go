// Package remotestorage keeps the metadata of Kafka tiered storage (KIP-405
// remote log segments) in PostgreSQL, for brokers of a Kafka-compatible
// system that share one database.
//
// # Managers
//
// Two implementations satisfy [RemoteLogMetadataManager] and
// [KafkaExtensions], with the same behaviour:
//
//   - [PgManager] stores everything in PostgreSQL. Any number of managers, in
//     any number of processes, may share one database. Every operation that
//     succeeds is one round trip (one SQL statement whose WHERE clause
//     enforces the state machine), except a write that races another on the
//     same partition and CaughtUp with a read replica
//     (docs/ARCHITECTURE.md, "How a call flows").
//   - [InMemoryManager] is the reference implementation, in memory.
//
// # Segment lifecycle
//
// A segment is added in COPY_SEGMENT_STARTED and moves through the
// transitions of statemachine.go, the single source of truth (the SQL
// statements receive their allowed from-states from it):
//
//	COPY_SEGMENT_STARTED   → COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED
//	COPY_SEGMENT_FINISHED  → COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED
//	DELETE_SEGMENT_STARTED → DELETE_SEGMENT_STARTED, DELETE_SEGMENT_FINISHED
//	DELETE_SEGMENT_FINISHED → DELETE_SEGMENT_FINISHED
//
// Self-transitions are idempotent retries. A segment in
// DELETE_SEGMENT_FINISHED is forgotten by every query; its id stays taken.
//
// # Queries
//
// Only COPY_SEGMENT_FINISHED segments answer offset lookups. The range of
// epoch e in segment s runs from s.SegmentLeaderEpochs[e] to the start of the
// next larger epoch minus one, or to s.EndOffset. Where several finished
// segments hold an offset, the one whose range starts latest wins, then the
// one whose first COPY_SEGMENT_FINISHED was applied last.
//
// # Partition delete
//
// A partition moves none → DELETE_PARTITION_MARKED → DELETE_PARTITION_STARTED
// → DELETE_PARTITION_FINISHED. Once marked it refuses adds; at FINISHED every
// one of its segments is forgotten.
//
// # Errors
//
// Errors wrap one of the sentinels ([ErrInvalidAdd], [ErrSegmentNotFound],
// [ErrInvalidSegmentTransition], [ErrInvalidPartitionDeleteTransition],
// [ErrNotReady], [ErrIO], and [ErrSchemaMismatch] from [NewPgManager]);
// match them with errors.Is. A store failure wraps ErrIO and the driver's
// error, so errors.As to *pgconn.PgError and errors.Is(err,
// context.Canceled) keep working.
//
// A failed write whose connection broke after it was sent may have
// committed: [OutcomeUnknown] tells those apart, and [NewPool] /
// [ConfigurePool] build a pool that backs off while the database is down.
//
// # Scale-out
//
// [WithCache] keeps the partitions a broker consumes (Kafka's assignment
// hooks, [PgManager.OnPartitionLeadershipChanges] and
// [PgManager.OnStopPartitions]) in memory; [WithReadReplica] sends the other
// queries to a hot standby; CaughtUp says when a read sees every committed
// write. How the cache stays fresh is explained once, in docs/SCALING.md
// ("How the cache stays fresh").
//
// # Observability
//
// Package metrics (github.com/krabka/remotestorage/metrics) wraps any
// manager with latency histograms, error counters (Prometheus) and
// structured logs, and exports the stuck work as gauges; it is a package of
// its own so that this one links no Prometheus client. Tracing plugs into
// the pgx pool the caller builds (its ConnConfig.Tracer).
//
// # Schema
//
// [Migrate] applies the embedded goose migrations. [NewPgManager] refuses a
// database whose schema is older than [SchemaVersion]. It accepts a newer
// one when every newer migration declares this code compatible, which is
// what lets a rolling upgrade run old and new brokers on one database, and
// refuses it otherwise (docs/MIGRATIONS.md).
//
// Four views serve DBAs: rlmm_segments_v (one row per segment ever added,
// states by name), rlmm_segment_epochs_v (one row per segment and leader
// epoch: the offset ranges lookups match), rlmm_partitions_v (one row per
// partition: segments per state, bytes, delete state) and rlmm_stuck_v
// (segment uploads and deletes, and partition deletes, left in flight).
// They, the tables and the guard triggers are commented for psql;
// docs/DBA.md lists ready queries for DBAs and the repair guide.
package remotestorage
