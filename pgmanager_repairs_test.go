package remotestorage_test

// The library's writes beside the repair functions'. An update's
// bookkeeping (the write order taken under the partition's lock, the change
// feed, the epoch rows, the notification) is written twice: in the library's
// statements (queries/segments.sql, queries/partitions.sql) and in the
// repair functions of the baseline. Release 1 is frozen, so nothing shares
// the two copies; this test holds them together by applying the same
// transitions to two identical databases, one through each copy, and
// comparing what each leaves.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/testwait"
)

// diffStep is one transition, applied through both copies: a segment's
// (segment names one of diffSegments) or the partition's delete record
// (segment is "").
type diffStep struct {
	segment     string
	state       rs.RemoteLogSegmentState
	deleteState rs.RemotePartitionDeleteState
	brokerID    int32
	eventMs     int64
	// retry marks a self-transition, sent with the broker and time of the
	// write it repeats. There the copies differ by design: the library's
	// retry is a write (it records the broker and time again under a new
	// write order, as API.md says of every update that succeeds), while the
	// repair function's "current state again changes nothing (nothing is
	// stamped)" (DBA.md). The test checks each side's own shape on such a
	// step instead of comparing them.
	retry bool
}

// diffSegments are the partition's segments, added through the library in
// both set-ups before the steps: of one epoch and of several (which have
// epoch rows), two of them (E, F) over the same offsets so that the
// lookups' "finished last" decides, and D with a transaction index.
func diffSegments(tp rs.TopicIDPartition) map[string]rs.RemoteLogSegmentMetadata {
	segs := map[string]rs.RemoteLogSegmentMetadata{
		"A": segment(tp, 0, 99, map[rs.LeaderEpoch]int64{0: 0}),
		"B": segment(tp, 100, 199, map[rs.LeaderEpoch]int64{0: 100, 1: 150, 2: 180}),
		"C": segment(tp, 200, 299, map[rs.LeaderEpoch]int64{2: 200, 3: 250}),
		"D": segment(tp, 300, 399, map[rs.LeaderEpoch]int64{3: 300}),
		"E": segment(tp, 400, 499, map[rs.LeaderEpoch]int64{3: 400}),
		"F": segment(tp, 400, 499, map[rs.LeaderEpoch]int64{3: 400}),
		"G": segment(tp, 500, 599, map[rs.LeaderEpoch]int64{3: 500, 4: 550}),
	}
	for i, name := range slices.Sorted(maps.Keys(segs)) {
		s := segs[name]
		s.MaxTimestampMs = 10_000 + int64(i)*1000
		s.BrokerID = 1
		s.EventTimestampMs = 500
		s.SegmentSizeInBytes = 1000 + int32(i)
		if name == "D" {
			s.TxnIndexEmpty = false
		}
		if name == "B" {
			s.CustomMetadata = []byte("kept by every update")
		}
		segs[name] = s
	}
	return segs
}

// diffSteps covers every transition the state machines allow, the
// self-transitions included, on segments of one epoch and of several, and
// segments updated under each partition-delete state that allows it. The
// first step updates a segment with epoch rows.
var diffSteps = []diffStep{
	{segment: "B", state: rs.CopySegmentFinished, brokerID: 11, eventMs: 1001},
	{segment: "A", state: rs.CopySegmentFinished, brokerID: 12, eventMs: 1002},
	{segment: "A", state: rs.CopySegmentFinished, brokerID: 12, eventMs: 1002, retry: true},
	{segment: "G", state: rs.DeleteSegmentStarted, brokerID: 13, eventMs: 1003},
	{segment: "D", state: rs.DeleteSegmentStarted, brokerID: 14, eventMs: 1004},
	{segment: "F", state: rs.CopySegmentFinished, brokerID: 15, eventMs: 1005},
	{segment: "E", state: rs.CopySegmentFinished, brokerID: 16, eventMs: 1006},
	{segment: "C", state: rs.CopySegmentFinished, brokerID: 17, eventMs: 1007},
	{segment: "C", state: rs.DeleteSegmentStarted, brokerID: 18, eventMs: 1008},
	{segment: "C", state: rs.DeleteSegmentStarted, brokerID: 18, eventMs: 1008, retry: true},
	{segment: "C", state: rs.DeleteSegmentFinished, brokerID: 19, eventMs: 1009},
	{segment: "C", state: rs.DeleteSegmentFinished, brokerID: 19, eventMs: 1009, retry: true},
	{segment: "A", state: rs.DeleteSegmentStarted, brokerID: 20, eventMs: 1010},
	{segment: "A", state: rs.DeleteSegmentFinished, brokerID: 21, eventMs: 1011},
	{deleteState: rs.DeletePartitionMarked, brokerID: 22, eventMs: 1012},
	{deleteState: rs.DeletePartitionMarked, brokerID: 22, eventMs: 1012, retry: true},
	{segment: "D", state: rs.DeleteSegmentFinished, brokerID: 23, eventMs: 1013},
	{segment: "G", state: rs.DeleteSegmentFinished, brokerID: 24, eventMs: 1014},
	{deleteState: rs.DeletePartitionStarted, brokerID: 25, eventMs: 1015},
	{deleteState: rs.DeletePartitionStarted, brokerID: 25, eventMs: 1015, retry: true},
	{segment: "B", state: rs.DeleteSegmentStarted, brokerID: 26, eventMs: 1016},
	{deleteState: rs.DeletePartitionFinished, brokerID: 27, eventMs: 1017},
	{deleteState: rs.DeletePartitionFinished, brokerID: 27, eventMs: 1017, retry: true},
}

// TestRepairFunctionsDoTheLibrarysBookkeeping applies diffSteps to two
// identical databases, through the library in one and through
// rlmm_set_segment_state and rlmm_set_partition_delete_state in the other,
// and after each step compares, with the versions and transaction ids named
// by the step that took them: every column of every row; the rows written,
// and the change feed (the segments the snapshot taken before the step does
// not see); the notifications; the answers of a manager without cache, which
// a cache following the partition must give too. Each side is also checked
// on its own: each write's order above every earlier one, the epoch rows
// following their segment, the repair's rows stamped with its own
// transaction. The sub-tests under "a wrong repair function" replace a
// function in their own database with a broken variant, and require the
// comparison to report it.
func TestRepairFunctionsDoTheLibrarysBookkeeping(t *testing.T) {
	t.Parallel()
	t.Run("the same transitions", func(t *testing.T) {
		t.Parallel()
		lib, rep := newDiffPair(t)
		step, diffs := runDifferential(t, lib, rep, diffSteps)
		require.Empty(t, diffs, "the library and the repair functions differ at %s:\n%s", step, strings.Join(diffs, "\n"))
	})
	for _, tc := range []struct {
		name     string
		function string // the function replaced, as regprocedure
		from, to string // a regular expression of its definition, and what replaces it
		want     string // a part of the differences reported
	}{
		{"forgets the epoch rows", "rlmm_set_segment_state(uuid,text,integer,bigint)",
			`(?s)UPDATE rlmm_segment_epochs e\s.*?;`, `NULL;`,
			"rlmm_segment_epochs"},
		{"stamps last_version below the newest write order", "rlmm_set_segment_state(uuid,text,integer,bigint)",
			`new_version := greatest\(seg\.last_version \+ 1, write_order\);`,
			`new_version := CASE WHEN target = 1 THEN write_order ELSE seg.last_version + 1 END;`,
			"not above the earlier writes"},
		{"stamps the current state again", "rlmm_set_segment_state(uuid,text,integer,bigint)",
			`(?s)IF seg\.state = target THEN.*?END IF;`, ``,
			"changes nothing"},
		{"does not notify", "rlmm_set_partition_delete_state(uuid,integer,text,integer,bigint)",
			`PERFORM pg_notify\('rlmm_changes'.*?;`, `NULL;`,
			"notifications"},
	} {
		t.Run("a wrong repair function/"+tc.name, func(t *testing.T) {
			t.Parallel()
			lib, rep := newDiffPair(t)
			var def string
			require.NoError(t, rep.admin.QueryRow(t.Context(), `SELECT pg_get_functiondef($1::regprocedure)`, tc.function).Scan(&def))
			broken := regexp.MustCompile(tc.from).ReplaceAllString(def, tc.to)
			require.NotEqual(t, def, broken, "the variant must change the function: %s", tc.from)
			execSQL(t, rep.admin, broken)

			step, diffs := runDifferential(t, lib, rep, diffSteps)
			require.NotEmpty(t, diffs, "a repair function that %s went unnoticed", tc.name)
			t.Logf("reported at %s:\n%s", step, strings.Join(diffs, "\n"))
			require.Contains(t, strings.Join(diffs, "\n"), tc.want)
		})
	}
}

// diffSide is one of the two set-ups.
type diffSide struct {
	name   string
	tp     rs.TopicIDPartition
	segs   map[string]rs.RemoteLogSegmentMetadata
	admin  *pgxpool.Pool
	m      *rs.PgManager // no cache: the library's writes, and the database's answers
	cached *rs.PgManager // follows the partition
	listen *pgx.Conn     // LISTENs on rlmm_changes
	// write applies a step; xid is the transaction's id when the side can
	// tell it ("" when it wrote nothing), returned what the call returned.
	write func(ctx context.Context, s diffStep) (xid string, returned *int64, err error)
	// retriesWrite: a self-transition writes (the library's).
	retriesWrite bool
	// asyncNotify: the notification comes after the call returns (the
	// library's notifier), not at the commit.
	asyncNotify bool

	raw        map[string]map[string]any // the rows as last read
	versions   map[int64]string          // a version → the step that took it
	xids       map[string]string         // a transaction id → the step that wrote it
	maxVersion int64
	markers    int
	names      *strings.Replacer // ids → names, for reading
}

// newDiffPair returns the two set-ups, each a database of its own with the
// same segments (same ids) added through the library, and a cache following
// the partition.
func newDiffPair(t *testing.T) (lib, rep *diffSide) {
	t.Helper()
	tp := testTP(0)
	segs := diffSegments(tp)
	lib = newDiffSide(t, "library", tp, segs)
	lib.retriesWrite, lib.asyncNotify = true, true
	lib.write = func(ctx context.Context, s diffStep) (string, *int64, error) {
		if s.segment == "" {
			return "", nil, lib.m.PutRemotePartitionDeleteMetadata(ctx, rs.RemotePartitionDeleteMetadata{
				TopicIDPartition: tp, State: s.deleteState, BrokerID: s.brokerID, EventTimestampMs: s.eventMs,
			})
		}
		return "", nil, lib.m.UpdateRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadataUpdate{
			SegmentID: segs[s.segment].SegmentID, State: s.state, BrokerID: s.brokerID, EventTimestampMs: s.eventMs,
		})
	}
	rep = newDiffSide(t, "repair", tp, segs)
	rep.write = func(ctx context.Context, s diffStep) (string, *int64, error) {
		tx, err := rep.admin.Begin(ctx)
		if err != nil {
			return "", nil, err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		var returned int64
		if s.segment == "" {
			err = tx.QueryRow(ctx, `SELECT rlmm_set_partition_delete_state($1, $2, $3, $4, $5)`,
				tp.TopicID, tp.Partition, s.deleteState.String(), s.brokerID, s.eventMs).Scan(&returned)
		} else {
			err = tx.QueryRow(ctx, `SELECT rlmm_set_segment_state($1, $2, $3, $4)`,
				segs[s.segment].SegmentID.ID, s.state.String(), s.brokerID, s.eventMs).Scan(&returned)
		}
		if err != nil {
			return "", nil, err
		}
		var xid *string // NULL when the call wrote nothing
		if err := tx.QueryRow(ctx, `SELECT pg_current_xact_id_if_assigned()::text`).Scan(&xid); err != nil {
			return "", nil, err
		}
		if err := tx.Commit(ctx); err != nil {
			return "", nil, err
		}
		if xid == nil {
			return "", &returned, nil
		}
		return *xid, &returned, nil
	}
	return lib, rep
}

func newDiffSide(t *testing.T, name string, tp rs.TopicIDPartition, segs map[string]rs.RemoteLogSegmentMetadata) *diffSide {
	t.Helper()
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	d := &diffSide{
		name: name, tp: tp, segs: segs, admin: newPool(t, dsn, 0, false),
		versions: map[int64]string{0: "0"}, xids: map[string]string{},
	}
	pairs := []string{tp.TopicID.String(), "T"}
	for n, s := range segs {
		pairs = append(pairs, s.SegmentID.ID.String(), n)
	}
	d.names = strings.NewReplacer(pairs...)
	var err error
	d.listen, err = pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.listen.Close(context.Background()) })
	_, err = d.listen.Exec(ctx, "LISTEN rlmm_changes")
	require.NoError(t, err)
	d.m = newManager(t, newPool(t, dsn, 0, false), rs.WithForgottenRetention(0))
	for _, n := range slices.Sorted(maps.Keys(segs)) {
		require.NoError(t, d.m.AddRemoteLogSegmentMetadata(ctx, segs[n]))
	}
	d.cached = newCachedManager(t, dsn, rs.WithForgottenRetention(0))
	require.NoError(t, d.cached.OnPartitionLeadershipChanges(ctx, nil, []rs.TopicIDPartition{tp}))
	waitLoaded(t, d.cached, tp)

	// The adds, named in the order they were made, as the steps' writes are.
	d.raw = d.readRows(t)
	newVersions, newXids := d.unlabelled(d.raw)
	for i, v := range newVersions {
		d.versions[v] = fmt.Sprintf("add%d", i+1)
		d.maxVersion = max(d.maxVersion, v)
	}
	for i, x := range newXids {
		d.xids[x] = fmt.Sprintf("add%d", i+1)
	}
	// The adds' notifications, sent after them by the library's notifier,
	// are not a step's.
	_, err = d.notifications(t, d.maxVersion, true)
	require.NoError(t, err)
	return d
}

// diffObservation is what a step left in one set-up, normalised.
type diffObservation struct {
	rows     []string // every row, versions and transaction ids by the step that took them
	written  []string // the rows the step changed
	feed     []string // the segments the snapshot before the step does not see
	notified []string // the notifications the step sent
	answers  string   // the manager's answers without cache
	diffs    []string // what the side got wrong by itself
}

// runDifferential applies steps to both sides in turn, and returns the
// first step where they differ, with the differences; "" and none when they
// never do.
func runDifferential(t *testing.T, lib, rep *diffSide, steps []diffStep) (string, []string) {
	t.Helper()
	for i, s := range steps {
		what := fmt.Sprintf("step %d, %s", i+1, lib.describe(s))
		l := lib.step(t, i+1, s)
		r := rep.step(t, i+1, s)
		var diffs []string
		for _, side := range []struct {
			name string
			o    diffObservation
		}{{lib.name, l}, {rep.name, r}} {
			for _, d := range side.o.diffs {
				diffs = append(diffs, side.name+": "+d)
			}
		}
		both := func(what string, l, r []string) {
			diffs = append(diffs, compareLines(what, lib.name, l, rep.name, r)...)
		}
		both("rows", l.rows, r.rows)
		if !s.retry {
			// On a retry each side's own shape was checked (diffStep.retry).
			both("rows written", l.written, r.written)
			both("change feed", l.feed, r.feed)
			both("notifications", l.notified, r.notified)
		}
		both("answers", lines(l.answers), lines(r.answers))
		if len(diffs) > 0 {
			return what, diffs
		}
	}
	return "", nil
}

// describe names a step, with the state it leaves.
func (d *diffSide) describe(s diffStep) string {
	if s.segment == "" {
		from := "NONE"
		if st, ok := d.raw[d.partitionKey()]["delete_state"].(json.Number); ok {
			n, _ := st.Int64()
			from = rs.RemotePartitionDeleteState(n).String()
		}
		return fmt.Sprintf("partition delete %s -> %s", from, s.deleteState)
	}
	n, _ := d.raw[d.segmentKey(s.segment)]["state"].(json.Number).Int64()
	epochs := "one epoch"
	if len(d.segs[s.segment].SegmentLeaderEpochs) > 1 {
		epochs = "several epochs"
	}
	return fmt.Sprintf("segment %s (%s) %s -> %s", s.segment, epochs, rs.RemoteLogSegmentState(n), s.state)
}

func (d *diffSide) partitionKey() string {
	return fmt.Sprintf("rlmm_partitions %s/%d", d.tp.TopicID, d.tp.Partition)
}

func (d *diffSide) segmentKey(name string) string {
	return "rlmm_segments " + d.segs[name].SegmentID.ID.String()
}

// step applies s to the side and observes what it left.
func (d *diffSide) step(t *testing.T, n int, s diffStep) diffObservation {
	t.Helper()
	ctx := t.Context()
	var o diffObservation
	fail := func(format string, args ...any) {
		o.diffs = append(o.diffs, d.names.Replace(fmt.Sprintf(format, args...)))
	}
	label := fmt.Sprintf("step%d", n)

	var snapshot string
	require.NoError(t, d.admin.QueryRow(ctx, `SELECT pg_current_snapshot()::text`).Scan(&snapshot))
	before := d.raw
	xid, returned, err := d.write(ctx, s)
	if err != nil {
		fail("the write failed: %v", err)
	}
	after := d.readRows(t)
	d.raw = after

	// The versions and transaction ids first seen now are this step's.
	newVersions, newXids := d.unlabelled(after)
	for _, v := range newVersions {
		if v <= d.maxVersion {
			fail("version %d appeared at this step but is not above the earlier writes' (the newest was %s, %d)", v, d.versions[d.maxVersion], d.maxVersion)
		}
	}
	if len(newVersions) > 1 {
		fail("one write took %d versions: %v", len(newVersions), newVersions)
	}
	for i, v := range newVersions {
		d.versions[v] = label
		if i > 0 {
			d.versions[v] = fmt.Sprintf("%s#%d", label, i+1)
		}
		d.maxVersion = max(d.maxVersion, v)
	}
	if len(newXids) > 1 {
		fail("one write left %d transaction ids: %v", len(newXids), newXids)
	}
	for _, x := range newXids {
		d.xids[x] = label
	}

	// The rows written, and the stamps each must carry.
	writes := !s.retry || d.retriesWrite
	var stamp int64 = -1 // the step's write order, as its rows carry it
	for _, key := range slices.Sorted(maps.Keys(after)) {
		row, old := after[key], before[key]
		if old != nil && rawEqual(row, old) {
			continue
		}
		o.written = append(o.written, d.names.Replace(key))
		version := "last_version"
		if strings.HasPrefix(key, "rlmm_partitions ") {
			version = "delete_version"
		}
		v := jsonInt(row[version])
		if !slices.Contains(newVersions, v) {
			fail("%s: %s %s is not above the earlier writes' (the newest was %s)", key, version, d.versions[v], d.versions[d.maxVersion])
		}
		stamp = v
		if strings.HasPrefix(key, "rlmm_segments ") {
			if x, _ := row["last_xid"].(string); !slices.Contains(newXids, x) {
				fail("%s: last_xid %s is not this step's transaction", key, d.xids[x])
			} else if xid != "" && x != xid {
				fail("%s: last_xid %s, the repair's transaction is %s", key, x, xid)
			}
		}
	}
	target, versionCol := d.partitionKey(), "delete_version"
	if s.segment != "" {
		target, versionCol = d.segmentKey(s.segment), "last_version"
	}
	if writes && stamp < 0 {
		fail("the step wrote nothing")
	}
	if returned != nil {
		if held := jsonInt(after[target][versionCol]); *returned != held {
			fail("the call returned %d, the row holds %s %d", *returned, versionCol, held)
		}
	}
	for _, diff := range d.epochRowsFollow(after) {
		fail("%s", diff)
	}

	// The change feed, by the caches' rule, and the library's own read of it.
	require.NoError(t, d.admin.QueryRow(ctx, `
		SELECT coalesce(array_agg(s.segment_id::text ORDER BY s.segment_id), '{}') FROM rlmm_segments s
		WHERE s.topic_id = $1 AND s.partition = $2
		  AND (s.last_xid >= pg_snapshot_xmax($3::pg_snapshot) OR s.last_xid IN (SELECT pg_snapshot_xip($3::pg_snapshot)))`,
		d.tp.TopicID, d.tp.Partition, snapshot).Scan(&o.feed))
	for i := range o.feed {
		o.feed[i] = d.names.Replace(o.feed[i])
	}
	read, err := d.m.PartitionChangesForTest(ctx, d.tp, snapshot)
	require.NoError(t, err)
	if read != len(o.feed) {
		fail("the library's catch-up read %d segments, the feed's rule finds %v", read, o.feed)
	}

	payloads, err := d.notifications(t, stamp, d.asyncNotify)
	if err != nil {
		fail("%v", err)
	}
	for _, p := range payloads {
		o.notified = append(o.notified, d.notification(p))
	}

	if s.retry {
		if d.retriesWrite {
			o.diffs = append(o.diffs, d.retryWrote(s, before, after, target, label, o)...)
			// Named as the write it repeats, so that the rows compare
			// with a side that wrote nothing.
			for _, v := range newVersions {
				d.versions[v] = d.versions[jsonInt(before[target][versionCol])]
			}
			if s.segment != "" {
				for _, x := range newXids {
					d.xids[x] = d.xids[before[target]["last_xid"].(string)]
				}
			}
		} else if len(o.written) > 0 || len(o.feed) > 0 || len(o.notified) > 0 {
			fail("the current state again wrote %v, fed %v, notified %v: DBA.md says it changes nothing", o.written, o.feed, o.notified)
		}
	}
	o.rows = d.normalise(after, before, !s.retry)

	// The database's answers, which the cache following the partition
	// must give once caught up.
	o.answers, err = diffAnswers(ctx, d.m, d.tp)
	require.NoError(t, err)
	o.answers = d.names.Replace(o.answers)
	waitCaughtUp(t, d.cached, d.tp)
	cached, err := diffAnswers(ctx, d.cached, d.tp)
	require.NoError(t, err)
	for _, diff := range compareLines("answers", "the cache (caught up)", lines(d.names.Replace(cached)), "the database", lines(o.answers)) {
		fail("%s", diff)
	}
	return o
}

// retryWrote checks the library's self-transition: one write of the target
// (a segment with its epoch rows, or the partition row) that changes its
// stamps and nothing else, in the feed and notified like any write.
func (d *diffSide) retryWrote(s diffStep, before, after map[string]map[string]any, target, label string, o diffObservation) []string {
	var diffs []string
	fail := func(format string, args ...any) { diffs = append(diffs, d.names.Replace(fmt.Sprintf(format, args...))) }
	stamps := map[string]bool{"last_version": true, "last_xid": true, "updated_at": true, "delete_version": true}
	var want []string
	for key := range after {
		if key == target || (s.segment != "" && strings.HasPrefix(key, "rlmm_segment_epochs "+d.segs[s.segment].SegmentID.ID.String()+"/")) {
			want = append(want, d.names.Replace(key))
		}
		for col, v := range after[key] {
			if before[key] != nil && !rawEqual(v, before[key][col]) && !stamps[col] {
				fail("the retry changed %s of %s", col, key)
			}
		}
	}
	slices.Sort(want)
	if !slices.Equal(want, o.written) {
		fail("the retry wrote %v, want %v", o.written, want)
	}
	wantFeed := []string{}
	if s.segment != "" {
		wantFeed = []string{s.segment}
	}
	if !slices.Equal(wantFeed, o.feed) {
		fail("the retry's change feed is %v, want %v", o.feed, wantFeed)
	}
	if want := []string{fmt.Sprintf("T/%d/%s", d.tp.Partition, label)}; !slices.Equal(want, o.notified) {
		fail("the retry notified %v, want %v", o.notified, want)
	}
	return diffs
}

// readRows reads every row of the tables the bookkeeping writes, as JSON,
// by table and key.
func (d *diffSide) readRows(t *testing.T) map[string]map[string]any {
	t.Helper()
	rows, err := d.admin.Query(t.Context(), `
		SELECT 'rlmm_partitions ' || topic_id || '/' || partition, to_jsonb(p) FROM rlmm_partitions p
		UNION ALL SELECT 'rlmm_segments ' || segment_id, to_jsonb(s) FROM rlmm_segments s
		UNION ALL SELECT 'rlmm_segment_epochs ' || segment_id || '/' || epoch, to_jsonb(e) FROM rlmm_segment_epochs e
		UNION ALL SELECT 'rlmm_epoch_ends ' || topic_id || '/' || partition || '/' || epoch, to_jsonb(ee) FROM rlmm_epoch_ends ee`)
	require.NoError(t, err)
	out := map[string]map[string]any{}
	for rows.Next() {
		var key string
		var doc []byte
		require.NoError(t, rows.Scan(&key, &doc))
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.UseNumber() // versions and transaction ids exceed a float's precision
		var row map[string]any
		require.NoError(t, dec.Decode(&row))
		out[key] = row
	}
	require.NoError(t, rows.Err())
	return out
}

// unlabelled returns the versions and transaction ids of rows not named
// yet, in increasing order.
func (d *diffSide) unlabelled(rows map[string]map[string]any) (versions []int64, xids []string) {
	for _, row := range rows {
		for col, v := range row {
			switch {
			case v == nil:
			case strings.HasSuffix(col, "_version"):
				if n := jsonInt(v); d.versions[n] == "" && !slices.Contains(versions, n) {
					versions = append(versions, n)
				}
			case strings.HasSuffix(col, "_xid"):
				if x := v.(string); d.xids[x] == "" && !slices.Contains(xids, x) {
					xids = append(xids, x)
				}
			}
		}
	}
	slices.Sort(versions)
	slices.SortFunc(xids, func(a, b string) int {
		x, _ := strconv.ParseUint(a, 10, 64)
		y, _ := strconv.ParseUint(b, 10, 64)
		return cmp.Compare(x, y)
	})
	return versions, xids
}

// normalise renders every row, one line each, with its versions and
// transaction ids named by the step that took them, created_at left out
// (the set-ups were made at different times) and updated_at as whether it
// moved at this step (when withUpdatedAt).
func (d *diffSide) normalise(rows, before map[string]map[string]any, withUpdatedAt bool) []string {
	var out []string
	for _, key := range slices.Sorted(maps.Keys(rows)) {
		row := rows[key]
		var cols []string
		for _, col := range slices.Sorted(maps.Keys(row)) {
			v := row[col]
			var text string
			switch col {
			case "created_at":
				continue
			case "updated_at":
				if !withUpdatedAt {
					continue
				}
				text = "kept"
				if before[key] == nil || !rawEqual(v, before[key][col]) {
					text = "moved"
				}
			default:
				text = d.value(col, v)
			}
			cols = append(cols, col+"="+text)
		}
		out = append(out, d.names.Replace(key+" {"+strings.Join(cols, " ")+"}"))
	}
	return out
}

// value renders a column's value, a version or transaction id by the step
// that took it.
func (d *diffSide) value(col string, v any) string {
	switch {
	case v == nil:
		return "null"
	case strings.HasSuffix(col, "_version"):
		return d.versions[jsonInt(v)]
	case strings.HasSuffix(col, "_xid"):
		return "xid of " + d.xids[v.(string)]
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// epochRowsFollow checks that every epoch row carries its segment's copies.
func (d *diffSide) epochRowsFollow(rows map[string]map[string]any) []string {
	var diffs []string
	copies := map[string]string{
		"state": "state", "added_version": "added_version", "finished_version": "finished_version", "last_version": "last_version",
		"segment_start_offset": "start_offset", "segment_end_offset": "end_offset",
		"segment_size_bytes": "segment_size_bytes", "max_timestamp_ms": "max_timestamp_ms",
	}
	for _, key := range slices.Sorted(maps.Keys(rows)) {
		if !strings.HasPrefix(key, "rlmm_segment_epochs ") {
			continue
		}
		e := rows[key]
		s := rows["rlmm_segments "+e["segment_id"].(string)]
		for _, col := range slices.Sorted(maps.Keys(copies)) {
			if !rawEqual(e[col], s[copies[col]]) {
				diffs = append(diffs, fmt.Sprintf("%s: %s %s, its segment's %s %s", key, col, d.value(col, e[col]), copies[col], d.value(copies[col], s[copies[col]])))
			}
		}
	}
	return diffs
}

// notifications reads the notifications on rlmm_changes up to a marker the
// test sends, after the one carrying version when await (the library's
// notifier sends it after the call returns; version < 0: none awaited).
func (d *diffSide) notifications(t *testing.T, version int64, await bool) ([]string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testwait.Timeout(t))
	defer cancel()
	var got []string
	if await && version >= 0 {
		want := notificationOf(d.tp, version)
		for !slices.Contains(got, want) {
			n, err := d.listen.WaitForNotification(ctx)
			if err != nil {
				return got, fmt.Errorf("waiting for the notification %s after %v: %w", want, got, err)
			}
			got = append(got, n.Payload)
		}
	}
	d.markers++
	marker := fmt.Sprintf("marker-%d", d.markers) // no partition's: the caches ignore it
	execSQL(t, d.admin, `SELECT pg_notify('rlmm_changes', $1)`, marker)
	for {
		n, err := d.listen.WaitForNotification(ctx)
		if err != nil {
			return got, fmt.Errorf("waiting for the marker after %v: %w", got, err)
		}
		if n.Payload == marker {
			return got, nil
		}
		got = append(got, n.Payload)
	}
}

func notificationOf(tp rs.TopicIDPartition, version int64) string {
	return fmt.Sprintf("%s/%d/%d", tp.TopicID, tp.Partition, version)
}

// notification names a payload's version by the step that took it.
func (d *diffSide) notification(payload string) string {
	parts := strings.Split(payload, "/")
	if len(parts) == 3 {
		if v, err := strconv.ParseInt(parts[2], 10, 64); err == nil {
			name, ok := d.versions[v]
			if !ok {
				name = "a version no row carries"
			}
			return d.names.Replace(parts[0]+"/"+parts[1]) + "/" + name
		}
	}
	return d.names.Replace(payload)
}

// diffAnswers renders what m answers of tp: the lists, the lookups at the
// segments' edges and epoch changes, the per-epoch answers and the
// partition's delete state.
func diffAnswers(ctx context.Context, m *rs.PgManager, tp rs.TopicIDPartition) (string, error) {
	var b strings.Builder
	render := func(s rs.RemoteLogSegmentMetadata, found bool) string {
		if !found {
			return "none"
		}
		return fmt.Sprintf("%s %s broker %d at %d [%d, %d] epochs %v size %d max ts %d txn index empty %v metadata %q",
			s.SegmentID.ID, s.State, s.BrokerID, s.EventTimestampMs, s.StartOffset, s.EndOffset, s.SegmentLeaderEpochs,
			s.SegmentSizeInBytes, s.MaxTimestampMs, s.TxnIndexEmpty, s.CustomMetadata)
	}
	list, err := m.ListRemoteLogSegments(ctx, tp)
	if err != nil {
		return "", err
	}
	for _, s := range list {
		fmt.Fprintf(&b, "list: %s\n", render(s, true))
	}
	state, has, err := m.PartitionDeleteState(ctx, tp)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "partition delete state: %s %v\n", state, has)
	for e := rs.LeaderEpoch(0); e <= 4; e++ {
		byEpoch, err := m.ListRemoteLogSegmentsByEpoch(ctx, tp, e)
		if err != nil {
			return "", err
		}
		highest, highestOK, err1 := m.HighestOffsetForEpoch(ctx, tp, e)
		end, endOK, err2 := m.EpochEndOffset(ctx, tp, e)
		size, err3 := m.RemoteLogSize(ctx, tp, e)
		next, nextOK, err4 := m.NextSegmentWithTxnIndex(ctx, tp, e, 0)
		first, firstOK, err5 := m.FirstSegmentForTimestamp(ctx, tp, e, 0, 0)
		if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "epoch %d: highest offset %d %v; end offset %d %v; size %d\n", e, highest, highestOK, end, endOK, size)
		for _, s := range byEpoch {
			fmt.Fprintf(&b, "epoch %d: list: %s %s\n", e, s.SegmentID.ID, s.State)
		}
		fmt.Fprintf(&b, "epoch %d: next with a transaction index: %s\n", e, render(next, nextOK))
		fmt.Fprintf(&b, "epoch %d: first for timestamp 0: %s\n", e, render(first, firstOK))
		for _, o := range []int64{0, 50, 99, 100, 149, 150, 180, 199, 200, 250, 299, 300, 399, 400, 499, 500, 550, 599} {
			s, found, err := m.RemoteLogSegmentMetadata(ctx, tp, e, o)
			if err != nil {
				return "", err
			}
			if found {
				fmt.Fprintf(&b, "epoch %d: offset %d: %s\n", e, o, render(s, found))
			}
		}
	}
	return b.String(), nil
}

// compareLines reports the lines of what that a and b do not share, or
// both in full when they share the same lines in another order.
func compareLines(what, aName string, a []string, bName string, b []string) []string {
	if slices.Equal(a, b) {
		return nil
	}
	var diffs []string
	for _, l := range a {
		if !slices.Contains(b, l) {
			diffs = append(diffs, fmt.Sprintf("%s: only %s has %s", what, aName, l))
		}
	}
	for _, l := range b {
		if !slices.Contains(a, l) {
			diffs = append(diffs, fmt.Sprintf("%s: only %s has %s", what, bName, l))
		}
	}
	if len(diffs) == 0 {
		diffs = append(diffs, fmt.Sprintf("%s: %s %q, %s %q", what, aName, a, bName, b))
	}
	return diffs
}

func lines(s string) []string { return strings.Split(strings.TrimRight(s, "\n"), "\n") }

func rawEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func jsonInt(v any) int64 {
	n, ok := v.(json.Number)
	if !ok {
		return -1
	}
	i, _ := n.Int64()
	return i
}
