// Helpers shared by the schema and migration tests of this directory
// (those the root package's tests need too are in internal/rstest).

package migrations_test

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/migrations"
)

// Migrations.

// withNext returns the embedded migrations plus test-only next ones
// (version SchemaVersion+1, +2, …), never shipped under migrations/.
func withNext(t *testing.T, next ...string) fs.FS {
	t.Helper()
	fsys := fstest.MapFS{}
	names, err := fs.Glob(migrations.FS(), "*.sql")
	require.NoError(t, err)
	for _, name := range names {
		b, err := fs.ReadFile(migrations.FS(), name)
		require.NoError(t, err)
		fsys[name] = &fstest.MapFile{Data: b}
	}
	for i, sql := range next {
		fsys[fmt.Sprintf("%05d_upgrade_test_next_%d.sql", rs.SchemaVersion+1+int64(i), i)] = &fstest.MapFile{Data: []byte(sql)}
	}
	return fsys
}

// The guard triggers' fixture.

// guardFixture is a migrated database and a manager on it.
type guardFixture struct {
	pool *pgxpool.Pool
	m    *rs.PgManager
}

// addSegmentIn adds a segment with epochs 0 (offsets 0-19) and 1 (20-99) to
// a new partition of topic "orders" and takes it to state s, through the
// library.
func (f guardFixture) addSegmentIn(t *testing.T, s rs.RemoteLogSegmentState) rs.RemoteLogSegmentID {
	t.Helper()
	ctx := t.Context()
	id := rs.RemoteLogSegmentID{
		TopicIDPartition: rs.TopicIDPartition{TopicID: uuid.New(), Topic: "orders", Partition: 0},
		ID:               uuid.New(),
	}
	require.NoError(t, f.m.AddRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadata{
		SegmentID: id, StartOffset: 0, EndOffset: 99, SegmentSizeInBytes: 1024,
		State: rs.CopySegmentStarted, SegmentLeaderEpochs: map[rs.LeaderEpoch]int64{0: 0, 1: 20},
	}))
	for _, st := range pathTo[s] {
		require.NoError(t, f.m.UpdateRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadataUpdate{
			SegmentID: id, State: st, BrokerID: 1, EventTimestampMs: 1,
		}))
	}
	return id
}

func (f guardFixture) bookkeeping(t *testing.T, id rs.RemoteLogSegmentID) bookkeeping {
	t.Helper()
	var b bookkeeping
	require.NoError(t, f.pool.QueryRow(t.Context(), `
		SELECT p.delete_version, s.state, s.last_version, s.finished_version,
		       array(SELECT e.state FROM rlmm_segment_epochs e WHERE e.segment_id = s.segment_id ORDER BY e.epoch),
		       array(SELECT e.finished_version FROM rlmm_segment_epochs e WHERE e.segment_id = s.segment_id ORDER BY e.epoch)
		FROM rlmm_segments s JOIN rlmm_partitions p USING (topic_id, partition)
		WHERE s.segment_id = $1`, id.ID).Scan(
		&b.deleteVersion, &b.segmentState, &b.lastVersion, &b.finishedVersion, &b.epochStates, &b.epochFinished))
	return b
}

// epochCommandIDs returns the command id, within its transaction, of the
// last write of each epoch row of the segment.
func (f guardFixture) epochCommandIDs(t *testing.T, id rs.RemoteLogSegmentID) []int64 {
	t.Helper()
	var cids []int64
	require.NoError(t, f.pool.QueryRow(t.Context(),
		"SELECT array_agg(cmin::text::bigint ORDER BY epoch) FROM rlmm_segment_epochs WHERE segment_id = $1", id.ID).Scan(&cids))
	return cids
}

func newGuardFixture(t *testing.T) guardFixture {
	t.Helper()
	pool := pgtest.NewPool(t)
	m, err := rs.NewPgManager(t.Context(), pool)
	require.NoError(t, err)
	t.Cleanup(m.Close)
	return guardFixture{pool: pool, m: m}
}

// pathTo lists the library updates that take a new segment to state s.
var pathTo = map[rs.RemoteLogSegmentState][]rs.RemoteLogSegmentState{
	rs.CopySegmentStarted:    nil,
	rs.CopySegmentFinished:   {rs.CopySegmentFinished},
	rs.DeleteSegmentStarted:  {rs.CopySegmentFinished, rs.DeleteSegmentStarted},
	rs.DeleteSegmentFinished: {rs.CopySegmentFinished, rs.DeleteSegmentStarted, rs.DeleteSegmentFinished},
}

// bookkeeping is what the library keeps beside a segment's state.
type bookkeeping struct {
	deleteVersion   int64
	segmentState    int16
	lastVersion     int64
	finishedVersion *int64
	// Per epoch row: state and finished_version.
	epochStates   []int16
	epochFinished []*int64
}

// requireGuardError checks that err is the guard's refusal, with a message
// that names what a DBA needs.
func requireGuardError(t *testing.T, err error, constraint string, mentions ...string) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "want a PostgreSQL error, got %v", err)
	require.Equal(t, pgerrcode.CheckViolation, pgErr.Code, pgErr.Message)
	require.Equal(t, constraint, pgErr.ConstraintName)
	for _, m := range mentions {
		require.Contains(t, pgErr.Message, m)
	}
}
