package reliability_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/rlmmtest"
)

// Bad input: every invalid field of every write, against both managers.
// Each must fail with the right sentinel, with a message naming the field,
// and store nothing: the partition reads back as before, and, for
// PgManager, no table gained or changed a row.

const badMetaLimit = 16

type badInputEnv struct {
	m    rlmmtest.Manager
	pool *pgxpool.Pool // nil for InMemoryManager
}

func badInputEnvs(t *testing.T) map[string]badInputEnv {
	pool := pgtest.NewPool(t)
	pg, err := rs.NewPgManager(t.Context(), pool, rs.WithMaxCustomMetadataBytes(badMetaLimit))
	require.NoError(t, err)
	t.Cleanup(pg.Close)
	return map[string]badInputEnv{
		"memory":   {m: rs.NewInMemoryManager(rs.WithMaxCustomMetadataBytes(badMetaLimit))},
		"postgres": {m: pg, pool: pool},
	}
}

// tableDigest returns every row of every table as text, for PgManager; ""
// for InMemoryManager.
func (e badInputEnv) tableDigest(t *testing.T) string {
	t.Helper()
	if e.pool == nil {
		return ""
	}
	var digest string
	err := e.pool.QueryRow(context.Background(), `SELECT
		coalesce((SELECT string_agg(p::text, '|' ORDER BY p::text) FROM rlmm_partitions p), '') || '#' ||
		coalesce((SELECT string_agg(s::text, '|' ORDER BY s::text) FROM rlmm_segments s), '') || '#' ||
		coalesce((SELECT string_agg(e::text, '|' ORDER BY e::text) FROM rlmm_segment_epochs e), '')`).Scan(&digest)
	require.NoError(t, err)
	return digest
}

func validSegment(tp rs.TopicIDPartition) rs.RemoteLogSegmentMetadata {
	return rs.RemoteLogSegmentMetadata{
		SegmentID:   rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()},
		StartOffset: 100, EndOffset: 199, MaxTimestampMs: 5, BrokerID: 1, EventTimestampMs: 6,
		SegmentSizeInBytes: 10, CustomMetadata: []byte("ok"), State: rs.CopySegmentStarted,
		SegmentLeaderEpochs: map[rs.LeaderEpoch]int64{3: 100, 4: 150}, TxnIndexEmpty: true,
	}
}

var hostileTopics = []string{
	"", ".", "..", strings.Repeat("t", 250), "a/b", "a b", "naïve", "a\x00b", "topic\n",
	"x'; DROP TABLE rlmm_segments; --", `x"; DELETE FROM rlmm_partitions; --`, "$1", "%s%n", "\\x00",
}

func TestBadInputAdd(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		break_ func(s *rs.RemoteLogSegmentMetadata)
		field  string // the message must contain it
	}{
		{"state finished", func(s *rs.RemoteLogSegmentMetadata) { s.State = rs.CopySegmentFinished }, "state"},
		{"state delete finished", func(s *rs.RemoteLogSegmentMetadata) { s.State = rs.DeleteSegmentFinished }, "state"},
		{"state not a state", func(s *rs.RemoteLogSegmentMetadata) { s.State = 9 }, "state"},
		{"state negative", func(s *rs.RemoteLogSegmentMetadata) { s.State = -1 }, "state"},
		{"segment id zero", func(s *rs.RemoteLogSegmentMetadata) { s.SegmentID.ID = uuid.Nil }, "segment id"},
		{"topic id zero", func(s *rs.RemoteLogSegmentMetadata) { s.SegmentID.TopicIDPartition.TopicID = uuid.Nil }, "topic id"},
		{"partition negative", func(s *rs.RemoteLogSegmentMetadata) { s.SegmentID.TopicIDPartition.Partition = -1 }, "partition -1"},
		{"start offset negative", func(s *rs.RemoteLogSegmentMetadata) {
			s.StartOffset = -1
			s.SegmentLeaderEpochs = map[rs.LeaderEpoch]int64{0: -1}
		}, "start offset"},
		{"end offset before start", func(s *rs.RemoteLogSegmentMetadata) { s.EndOffset = 99 }, "end offset"},
		{"epochs empty", func(s *rs.RemoteLogSegmentMetadata) { s.SegmentLeaderEpochs = map[rs.LeaderEpoch]int64{} }, "leader epochs"},
		{"epochs nil", func(s *rs.RemoteLogSegmentMetadata) { s.SegmentLeaderEpochs = nil }, "leader epochs"},
		{"epoch negative", func(s *rs.RemoteLogSegmentMetadata) { s.SegmentLeaderEpochs = map[rs.LeaderEpoch]int64{-1: 100} }, "epoch -1"},
		{"epoch before the segment", func(s *rs.RemoteLogSegmentMetadata) { s.SegmentLeaderEpochs[3] = 99 }, "epoch 3"},
		{"epoch after the segment", func(s *rs.RemoteLogSegmentMetadata) { s.SegmentLeaderEpochs[4] = 200 }, "epoch 4"},
		{"epochs not increasing", func(s *rs.RemoteLogSegmentMetadata) { s.SegmentLeaderEpochs[5] = 120 }, "epoch 5"},
		{"epochs equal starts", func(s *rs.RemoteLogSegmentMetadata) { s.SegmentLeaderEpochs[4] = 100 }, "epoch 4"},
		{"size negative", func(s *rs.RemoteLogSegmentMetadata) { s.SegmentSizeInBytes = -1 }, "segment size"},
		{"custom metadata too long", func(s *rs.RemoteLogSegmentMetadata) { s.CustomMetadata = bytes.Repeat([]byte{0}, badMetaLimit+1) }, "custom metadata"},
	}
	for _, topic := range hostileTopics {
		cases = append(cases, struct {
			name   string
			break_ func(s *rs.RemoteLogSegmentMetadata)
			field  string
		}{"topic " + topic, func(s *rs.RemoteLogSegmentMetadata) { s.SegmentID.TopicIDPartition.Topic = topic }, "topic name"})
	}
	for name, e := range badInputEnvs(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			for _, c := range cases {
				tp := newTP("bad-add", 0)
				s := validSegment(tp)
				c.break_(&s)
				before := e.tableDigest(t)
				err := e.m.AddRemoteLogSegmentMetadata(ctx, s)
				require.ErrorIs(t, err, rs.ErrInvalidAdd, c.name)
				require.NotErrorIs(t, err, rs.ErrIO, c.name)
				require.Contains(t, err.Error(), c.field, c.name)
				require.False(t, rs.OutcomeUnknown(err), c.name)
				require.Equal(t, before, e.tableDigest(t), "%s: a refused add changed the tables", c.name)
				list, err := e.m.ListRemoteLogSegments(ctx, tp)
				require.NoError(t, err)
				require.Empty(t, list, c.name)
				// The id was not taken: the valid segment with it adds.
				if s.SegmentID.ID != uuid.Nil {
					require.NoError(t, e.m.AddRemoteLogSegmentMetadata(ctx, validSegment(tp)), c.name)
					fixed := validSegment(tp)
					fixed.SegmentID.ID = s.SegmentID.ID
					require.NoError(t, e.m.AddRemoteLogSegmentMetadata(ctx, fixed), "%s: the refused add took its id", c.name)
				}
			}

			// Refusals that need the store: a taken id, a partition being deleted.
			tp := newTP("bad-add", 1)
			s := validSegment(tp)
			require.NoError(t, e.m.AddRemoteLogSegmentMetadata(ctx, s))
			before := e.tableDigest(t)
			for _, other := range []rs.TopicIDPartition{tp, newTP("bad-add", 2)} {
				again := validSegment(other)
				again.SegmentID.ID = s.SegmentID.ID
				err := e.m.AddRemoteLogSegmentMetadata(ctx, again)
				require.ErrorIs(t, err, rs.ErrInvalidAdd)
				require.Contains(t, err.Error(), "already added")
				require.Equal(t, before, e.tableDigest(t))
			}
			require.NoError(t, e.m.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{TopicIDPartition: tp, State: rs.DeletePartitionMarked}))
			before = e.tableDigest(t)
			err := e.m.AddRemoteLogSegmentMetadata(ctx, validSegment(tp))
			require.ErrorIs(t, err, rs.ErrInvalidAdd)
			require.Contains(t, err.Error(), "partition delete")
			require.Equal(t, before, e.tableDigest(t))
			list, err := e.m.ListRemoteLogSegments(ctx, tp)
			require.NoError(t, err)
			require.Len(t, list, 1)
		})
	}
}

func TestBadInputUpdate(t *testing.T) {
	t.Parallel()
	for name, e := range badInputEnvs(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			tp := newTP("bad-update", 0)
			s := validSegment(tp)
			require.NoError(t, e.m.AddRemoteLogSegmentMetadata(ctx, s))
			other := validSegment(newTP("bad-update", 1))
			require.NoError(t, e.m.AddRemoteLogSegmentMetadata(ctx, other))
			valid := rs.RemoteLogSegmentMetadataUpdate{SegmentID: s.SegmentID, State: rs.CopySegmentFinished, BrokerID: 9, EventTimestampMs: 9, CustomMetadata: []byte("new")}
			cases := []struct {
				name     string
				break_   func(u *rs.RemoteLogSegmentMetadataUpdate)
				sentinel error
				field    string
			}{
				{"to copy started", func(u *rs.RemoteLogSegmentMetadataUpdate) { u.State = rs.CopySegmentStarted }, rs.ErrInvalidSegmentTransition, "COPY_SEGMENT_STARTED"},
				{"to no state", func(u *rs.RemoteLogSegmentMetadataUpdate) { u.State = 4 }, rs.ErrInvalidSegmentTransition, "RemoteLogSegmentState(4)"},
				{"to negative state", func(u *rs.RemoteLogSegmentMetadataUpdate) { u.State = -1 }, rs.ErrInvalidSegmentTransition, "RemoteLogSegmentState(-1)"},
				{"to no state, unknown id", func(u *rs.RemoteLogSegmentMetadataUpdate) { u.State = 100; u.SegmentID.ID = uuid.New() }, rs.ErrInvalidSegmentTransition, "RemoteLogSegmentState(100)"},
				{"custom metadata too long", func(u *rs.RemoteLogSegmentMetadataUpdate) { u.CustomMetadata = bytes.Repeat([]byte{1}, badMetaLimit+1) }, rs.ErrInvalidSegmentTransition, "custom metadata"},
				{"forbidden transition", func(u *rs.RemoteLogSegmentMetadataUpdate) { u.State = rs.DeleteSegmentFinished }, rs.ErrInvalidSegmentTransition, "COPY_SEGMENT_STARTED to DELETE_SEGMENT_FINISHED"},
				{"unknown segment id", func(u *rs.RemoteLogSegmentMetadataUpdate) { u.SegmentID.ID = uuid.New() }, rs.ErrSegmentNotFound, "segment "},
				{"zero segment id", func(u *rs.RemoteLogSegmentMetadataUpdate) { u.SegmentID.ID = uuid.Nil }, rs.ErrSegmentNotFound, uuid.Nil.String()},
				{"id of another partition", func(u *rs.RemoteLogSegmentMetadataUpdate) { u.SegmentID.ID = other.SegmentID.ID }, rs.ErrSegmentNotFound, other.SegmentID.ID.String()},
				{"partition of another topic id", func(u *rs.RemoteLogSegmentMetadataUpdate) { u.SegmentID.TopicIDPartition.TopicID = uuid.New() }, rs.ErrSegmentNotFound, s.SegmentID.ID.String()},
				{"another partition number", func(u *rs.RemoteLogSegmentMetadataUpdate) { u.SegmentID.TopicIDPartition.Partition = 7 }, rs.ErrSegmentNotFound, s.SegmentID.ID.String()},
			}
			for _, topic := range hostileTopics {
				cases = append(cases, struct {
					name     string
					break_   func(u *rs.RemoteLogSegmentMetadataUpdate)
					sentinel error
					field    string
				}{"topic " + topic, func(u *rs.RemoteLogSegmentMetadataUpdate) {
					u.SegmentID.TopicIDPartition.TopicID = uuid.New()
					u.SegmentID.TopicIDPartition.Topic = topic
				}, rs.ErrSegmentNotFound, s.SegmentID.ID.String()})
			}
			want, err := e.m.ListRemoteLogSegments(ctx, tp)
			require.NoError(t, err)
			for _, c := range cases {
				u := valid
				c.break_(&u)
				before := e.tableDigest(t)
				err := e.m.UpdateRemoteLogSegmentMetadata(ctx, u)
				require.ErrorIs(t, err, c.sentinel, c.name)
				require.NotErrorIs(t, err, rs.ErrIO, c.name)
				require.Contains(t, err.Error(), c.field, c.name)
				require.False(t, rs.OutcomeUnknown(err), c.name)
				require.Equal(t, before, e.tableDigest(t), "%s: a refused update changed the tables", c.name)
				got, err := e.m.ListRemoteLogSegments(ctx, tp)
				require.NoError(t, err)
				require.Equal(t, want, got, c.name)
			}
			require.NoError(t, e.m.UpdateRemoteLogSegmentMetadata(ctx, valid))
		})
	}
}

func TestBadInputPartitionDelete(t *testing.T) {
	t.Parallel()
	for name, e := range badInputEnvs(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			tp := newTP("bad-delete", 0)
			require.NoError(t, e.m.AddRemoteLogSegmentMetadata(ctx, validSegment(tp)))
			valid := rs.RemotePartitionDeleteMetadata{TopicIDPartition: tp, State: rs.DeletePartitionMarked, BrokerID: 1, EventTimestampMs: 1}
			cases := []struct {
				name   string
				break_ func(d *rs.RemotePartitionDeleteMetadata)
				field  string
			}{
				{"state not a state", func(d *rs.RemotePartitionDeleteMetadata) { d.State = 3 }, "RemotePartitionDeleteState(3)"},
				{"state negative", func(d *rs.RemotePartitionDeleteMetadata) { d.State = -2 }, "RemotePartitionDeleteState(-2)"},
				{"topic id zero", func(d *rs.RemotePartitionDeleteMetadata) { d.TopicIDPartition.TopicID = uuid.Nil }, "topic id"},
				{"partition negative", func(d *rs.RemotePartitionDeleteMetadata) { d.TopicIDPartition.Partition = -1 }, "partition -1"},
				{"started before marked", func(d *rs.RemotePartitionDeleteMetadata) { d.State = rs.DeletePartitionStarted }, "NONE to DELETE_PARTITION_STARTED"},
				{"finished before marked", func(d *rs.RemotePartitionDeleteMetadata) { d.State = rs.DeletePartitionFinished }, "NONE to DELETE_PARTITION_FINISHED"},
			}
			for _, topic := range hostileTopics {
				cases = append(cases, struct {
					name   string
					break_ func(d *rs.RemotePartitionDeleteMetadata)
					field  string
				}{"topic " + topic, func(d *rs.RemotePartitionDeleteMetadata) { d.TopicIDPartition.Topic = topic }, "topic name"})
			}
			for _, c := range cases {
				d := valid
				c.break_(&d)
				before := e.tableDigest(t)
				err := e.m.PutRemotePartitionDeleteMetadata(ctx, d)
				require.ErrorIs(t, err, rs.ErrInvalidPartitionDeleteTransition, c.name)
				require.NotErrorIs(t, err, rs.ErrIO, c.name)
				require.Contains(t, err.Error(), c.field, c.name)
				require.False(t, rs.OutcomeUnknown(err), c.name)
				require.Equal(t, before, e.tableDigest(t), "%s: a refused partition delete changed the tables", c.name)
				// No delete record: the partition still takes adds.
				require.NoError(t, e.m.AddRemoteLogSegmentMetadata(ctx, validSegment(tp)), c.name)
			}
			require.NoError(t, e.m.PutRemotePartitionDeleteMetadata(ctx, valid))
			// A backward transition, refused, changes nothing either.
			before := e.tableDigest(t)
			err := e.m.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{TopicIDPartition: tp, State: rs.DeletePartitionFinished})
			require.ErrorIs(t, err, rs.ErrInvalidPartitionDeleteTransition)
			require.Contains(t, err.Error(), "DELETE_PARTITION_MARKED to DELETE_PARTITION_FINISHED")
			require.Equal(t, before, e.tableDigest(t))
		})
	}
}
