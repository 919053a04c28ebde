package main

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage/internal/pgtest"
)

func TestSegmentsList(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	d := seedInspectData(t, dsn)
	p := func(extra ...string) []string {
		return append([]string{"segments", "list", "--topic-id", d.orders.TopicID.String(), "--partition", "0"}, extra...)
	}
	listIDs := func(args ...string) []uuid.UUID {
		var segs []segmentView
		require.NoError(t, json.Unmarshal([]byte(ok(t, dsn, append(args, "-o", "json")...)), &segs))
		ids := make([]uuid.UUID, len(segs))
		for i, s := range segs {
			ids[i] = s.SegmentID
		}
		return ids
	}

	table := ok(t, dsn, p()...)
	require.Contains(t, table, "4 segments in orders-0")
	require.Contains(t, table, "0:2000-2499 1:2500-2999")
	require.NotContains(t, table, d.s[0].String(), "forgotten")

	require.Equal(t, []uuid.UUID{d.s[1], d.s[2], d.s[3], d.s[4]}, listIDs(p()...))
	require.Equal(t, []uuid.UUID{d.s[2], d.s[3], d.s[4]}, listIDs(p("--epoch", "1")...))
	require.Equal(t, []uuid.UUID{d.s[1], d.s[2], d.s[3]}, listIDs(p("--state", "COPY_SEGMENT_FINISHED")...))
	require.Equal(t, []uuid.UUID{d.s[4]}, listIDs(p("--state", "copy_started")...))
	require.Empty(t, listIDs(p("--epoch", "7")...))

	// The same partition by Kafka's form of the id, and by name.
	kafkaForm := []string{"segments", "list", "--topic-id", kafkaTopicID(d.orders.TopicID), "--partition", "0"}
	require.Equal(t, []uuid.UUID{d.s[1], d.s[2], d.s[3], d.s[4]}, listIDs(kafkaForm...))
	require.Equal(t, []uuid.UUID{d.s[1], d.s[2], d.s[3], d.s[4]}, listIDs("segments", "list", "--topic", "orders", "--partition", "0"))

	// A deleted partition lists nothing; an unknown topic name is "not found".
	require.Contains(t, ok(t, dsn, "segments", "list", "--topic", "gone", "--partition", "0"), "no segments")
	r := rlmmctl(t, nil, "--database-url", dsn, "segments", "list", "--topic", "nosuch", "--partition", "0")
	require.Equal(t, exitNotFound, r.code, r.output())

	r = rlmmctl(t, nil, "--database-url", dsn, "segments", "list", "--topic-id", "nonsense", "--partition", "0")
	require.Equal(t, exitUsage, r.code, r.output())
	r = rlmmctl(t, nil, "--database-url", dsn, "segments", "list", "--topic", "orders", "--partition", "0", "--state", "BOGUS")
	require.Equal(t, exitUsage, r.code, r.output())
}

func TestLookupAndHighestOffset(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	d := seedInspectData(t, dsn)
	lookup := func(epoch, offset int64) result {
		return rlmmctl(t, nil, "--database-url", dsn, "lookup", "--topic-id", kafkaTopicID(d.orders.TopicID),
			"--partition", "0", "--epoch", fmt.Sprint(epoch), "--offset", fmt.Sprint(offset))
	}

	hit := lookup(0, 2499)
	require.Equal(t, 0, hit.code, hit.output())
	require.Contains(t, hit.stdout, "is in segment "+d.s[2].String())
	require.Contains(t, hit.stdout, "offsets 2500-2999") // epoch 1's range, shown in the detail
	hit = lookup(1, 2500)
	require.Equal(t, 0, hit.code, hit.output())
	require.Contains(t, hit.stdout, d.s[2].String())

	for _, miss := range []struct{ epoch, offset int64 }{
		{0, 2500}, // epoch 1's part of s[2]
		{0, 500},  // forgotten s[0]
		{1, 4500}, // s[4] still copying
		{1, 9999}, // beyond the end
	} {
		r := lookup(miss.epoch, miss.offset)
		require.Equal(t, exitNotFound, r.code, r.output())
		require.Contains(t, r.stdout, fmt.Sprintf("no segment holds offset %d of epoch %d", miss.offset, miss.epoch))
		require.Empty(t, r.stderr)
	}

	var answer struct {
		Found   bool
		Segment *segmentView
	}
	r := rlmmctl(t, nil, "--database-url", dsn, "lookup", "--topic", "orders", "--partition", "0", "--epoch", "1", "--offset", "3500", "-o", "json")
	require.Equal(t, 0, r.code, r.output())
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &answer))
	require.True(t, answer.Found)
	require.Equal(t, d.s[3], answer.Segment.SegmentID)

	r = rlmmctl(t, nil, "--database-url", dsn, "lookup", "--topic", "orders", "--partition", "0", "--epoch", "1")
	require.Equal(t, exitUsage, r.code, r.output())
	require.Contains(t, r.stderr, "--offset is required")

	highest := func(extra ...string) result {
		return rlmmctl(t, nil, append([]string{"--database-url", dsn, "highest-offset", "--topic-id", d.orders.TopicID.String(), "--partition", "0"}, extra...)...)
	}
	r = highest("--epoch", "0")
	require.Equal(t, 0, r.code, r.output())
	require.Regexp(t, `(?m)^0\s+2999$`, r.stdout)
	r = highest("--epoch", "1")
	require.Equal(t, 0, r.code, r.output())
	require.Regexp(t, `(?m)^1\s+3999$`, r.stdout) // s[4] is not finished
	r = highest("--epoch", "5")
	require.Equal(t, exitNotFound, r.code, r.output())
	require.Contains(t, r.stdout, "no finished segment carries epoch 5")
	r = highest()
	require.Equal(t, 0, r.code, r.output())
	require.Regexp(t, `(?m)^0\s+2999$`, r.stdout)
	require.Regexp(t, `(?m)^1\s+3999$`, r.stdout)
	r = highest("--epoch", "1", "-o", "json")
	require.JSONEq(t, `{"epoch":1,"found":true,"highest_offset":3999}`, r.stdout)
}

func TestPartitionsList(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	d := seedInspectData(t, dsn)

	table := ok(t, dsn, "partitions", "list")
	require.Regexp(t, `(?m)^gone\s+0\s+`+d.gone.TopicID.String()+`\s+`+kafkaTopicID(d.gone.TopicID)+`\s+0\s+1\s+0\s+1\s+0 B\s+DELETE_PARTITION_FINISHED\s`, table)
	// orders: s4 copying, s1-s3 finished, s0 forgotten; bytes of s1-s4.
	require.Regexp(t, `(?m)^orders\s+0\s+`+d.orders.TopicID.String()+`\s+\S+\s+1\s+3\s+0\s+1\s+13\.7 KiB\s+NONE\s`, table)

	var parts []partitionSummary
	require.NoError(t, json.Unmarshal([]byte(ok(t, dsn, "partitions", "list", "--topic-id", kafkaTopicID(d.orders.TopicID), "-o", "json")), &parts))
	require.Len(t, parts, 1)
	require.Equal(t, "orders", parts[0].Topic)
	require.EqualValues(t, 3, parts[0].Segments["COPY_SEGMENT_FINISHED"])
	require.EqualValues(t, (2+3+4+5)*1000, parts[0].LiveBytes)
	require.Equal(t, "NONE", parts[0].DeleteState)
	require.WithinDuration(t, time.Now(), parts[0].LastChange, time.Minute)

	require.Contains(t, ok(t, dsn, "partitions", "list", "--topic", "nosuch"), "no partitions")
}

func TestSegmentsGet(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	d := seedInspectData(t, dsn)

	out := ok(t, dsn, "segments", "get", d.s[2].String())
	for _, want := range []string{
		"state:", "COPY_SEGMENT_FINISHED", "forgotten:", "no",
		"leader epoch 0:", "offsets 2000-2499", "leader epoch 1:", "offsets 2500-2999",
		kafkaTopicID(d.orders.TopicID), "custom metadata:", "15 bytes", "partition delete state:", "NONE",
	} {
		require.Contains(t, out, want)
	}
	require.Regexp(t, `forgotten:\s+yes`, ok(t, dsn, "segments", "get", d.s[0].String()))
	require.Regexp(t, `forgotten:\s+yes`, ok(t, dsn, "segments", "get", d.s[6].String()), "forgotten through the partition's delete")

	var v segmentView
	require.NoError(t, json.Unmarshal([]byte(ok(t, dsn, "segments", "get", d.s[6].String(), "-o", "json")), &v))
	require.Equal(t, "COPY_SEGMENT_FINISHED", v.State)
	require.Equal(t, "DELETE_PARTITION_FINISHED", v.PartitionDeleteState)
	require.True(t, *v.Forgotten)
	require.Equal(t, []epochView{{Epoch: 0, FirstOffset: 1000, LastOffset: 1999}}, v.LeaderEpochs)

	missing := uuid.New()
	r := rlmmctl(t, nil, "--database-url", dsn, "segments", "get", missing.String())
	require.Equal(t, exitNotFound, r.code, r.output())
	require.Contains(t, r.stderr, "segment "+missing.String()+" not found")

	r = rlmmctl(t, nil, "--database-url", dsn, "segments", "get", "not-a-uuid")
	require.Equal(t, exitUsage, r.code, r.output())
	r = rlmmctl(t, nil, "--database-url", dsn, "segments", "get")
	require.Equal(t, exitUsage, r.code, r.output())
}
