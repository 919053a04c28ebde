package main

// The helpers the tests of rlmmctl share: running the binary, the
// databases and managers they write through, the seeded store most
// commands are tested on, and reading the SVG of segments plot.

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage"
)

var build struct {
	once sync.Once
	path string
	out  []byte
	err  error
}

// binary builds rlmmctl once (with -race when the tests have it).
func binary(t *testing.T) string {
	t.Helper()
	build.once.Do(func() {
		build.path = filepath.Join(buildDir, "rlmmctl")
		args := []string{"build", "-o", build.path}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, ".")...)
		build.out, build.err = cmd.CombinedOutput()
	})
	require.NoError(t, build.err, "go build: %s", build.out)
	return build.path
}

// result is what one rlmmctl run printed and returned.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) output() string { return r.stdout + r.stderr }

// cleanEnv is the environment without anything that names a database, so
// that a developer's DATABASE_URL or PGHOST never leaks into a test.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "DATABASE_URL" || strings.HasPrefix(name, "PG") {
			continue
		}
		env = append(env, kv)
	}
	// A race-enabled binary sleeps a second at exit by default; a race it
	// finds still fails the run (exit status 66).
	env = append(env, "GORACE=atexit_sleep_ms=0 "+os.Getenv("GORACE"))
	return append(env, extra...)
}

// rlmmctl runs the binary with env added to a clean environment.
func rlmmctl(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), args...)
	cmd.Env = cleanEnv(env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if err != nil {
		var exitErr *exec.ExitError
		require.ErrorAs(t, err, &exitErr, "rlmmctl %v: %s", args, r.output())
		r.code = exitErr.ExitCode()
	}
	return r
}

// ok runs rlmmctl with --database-url dsn and requires exit status 0.
func ok(t *testing.T, dsn string, args ...string) string {
	t.Helper()
	r := rlmmctl(t, nil, append([]string{"--database-url", dsn}, args...)...)
	require.Equal(t, 0, r.code, "rlmmctl %v:\n%s", args, r.output())
	return r.stdout
}

// runInProcess calls run, for checks that need no database.
func runInProcess(args ...string) result {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// pgEnv spells dsn as libpq's PG* variables.
func pgEnv(t *testing.T, dsn string) []string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	require.NoError(t, err)
	env := []string{
		"PGHOST=" + cfg.Host,
		"PGPORT=" + strconv.Itoa(int(cfg.Port)),
		"PGUSER=" + cfg.User,
		"PGDATABASE=" + cfg.Database,
	}
	if cfg.Password != "" {
		env = append(env, "PGPASSWORD="+cfg.Password)
	}
	if cfg.TLSConfig == nil {
		env = append(env, "PGSSLMODE=disable")
	}
	return env
}

// testManager opens a pool on dsn and a PgManager over it, as a broker
// would; closeManager releases both.
func testManager(t *testing.T, dsn string) (pool *pgxpool.Pool, m *remotestorage.PgManager, closeManager func()) {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), dsn)
	require.NoError(t, err)
	m, err = remotestorage.NewPgManager(t.Context(), pool)
	if err != nil {
		pool.Close()
	}
	require.NoError(t, err)
	return pool, m, func() {
		m.Close()
		pool.Close()
	}
}

// inspectData is what seedInspectData wrote.
type inspectData struct {
	orders remotestorage.TopicIDPartition // a live partition
	gone   remotestorage.TopicIDPartition // a deleted partition
	// orders: s[0] forgotten (DELETE_SEGMENT_FINISHED), s[1] epoch 0,
	// s[2] epochs 0 (2000-2499) and 1 (2500-2999), s[3] epoch 1,
	// s[4] epoch 1 still COPY_SEGMENT_STARTED. gone: s[5] forgotten by
	// DELETE_SEGMENT_FINISHED, s[6] by the partition's delete.
	s [7]uuid.UUID
}

// seedInspectData writes segments through the library, as brokers would.
func seedInspectData(t *testing.T, dsn string) inspectData {
	t.Helper()
	ctx := context.Background()
	_, m, closeManager := testManager(t, dsn)
	defer closeManager()

	d := inspectData{
		orders: remotestorage.TopicIDPartition{TopicID: uuid.New(), Topic: "orders", Partition: 0},
		gone:   remotestorage.TopicIDPartition{TopicID: uuid.New(), Topic: "gone", Partition: 0},
	}
	for i := range d.s {
		d.s[i] = uuid.New()
	}
	now := time.Now().UnixMilli()
	add := func(tp remotestorage.TopicIDPartition, i int, start int64, epochs map[remotestorage.LeaderEpoch]int64, states ...remotestorage.RemoteLogSegmentState) {
		id := remotestorage.RemoteLogSegmentID{TopicIDPartition: tp, ID: d.s[i]}
		require.NoError(t, m.AddRemoteLogSegmentMetadata(ctx, remotestorage.RemoteLogSegmentMetadata{
			SegmentID: id, StartOffset: start, EndOffset: start + 999, MaxTimestampMs: now,
			BrokerID: 1, EventTimestampMs: now, SegmentSizeInBytes: int32(1000 * (i + 1)),
			CustomMetadata: []byte("custom-metadata"), State: remotestorage.CopySegmentStarted,
			SegmentLeaderEpochs: epochs, TxnIndexEmpty: true,
		}))
		for _, st := range states {
			require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, remotestorage.RemoteLogSegmentMetadataUpdate{
				SegmentID: id, EventTimestampMs: now, State: st, BrokerID: 2,
			}))
		}
	}
	type E = map[remotestorage.LeaderEpoch]int64
	fin := remotestorage.CopySegmentFinished
	add(d.orders, 0, 0, E{0: 0}, fin, remotestorage.DeleteSegmentStarted, remotestorage.DeleteSegmentFinished)
	add(d.orders, 1, 1000, E{0: 1000}, fin)
	add(d.orders, 2, 2000, E{0: 2000, 1: 2500}, fin)
	add(d.orders, 3, 3000, E{1: 3000}, fin)
	add(d.orders, 4, 4000, E{1: 4000})
	add(d.gone, 5, 0, E{0: 0}, fin)
	add(d.gone, 6, 1000, E{0: 1000}, fin)
	for _, st := range []remotestorage.RemotePartitionDeleteState{remotestorage.DeletePartitionMarked} {
		require.NoError(t, m.PutRemotePartitionDeleteMetadata(ctx, remotestorage.RemotePartitionDeleteMetadata{
			TopicIDPartition: d.gone, State: st, EventTimestampMs: now, BrokerID: 0}))
	}
	for _, st := range []remotestorage.RemoteLogSegmentState{remotestorage.DeleteSegmentStarted, remotestorage.DeleteSegmentFinished} {
		require.NoError(t, m.UpdateRemoteLogSegmentMetadata(ctx, remotestorage.RemoteLogSegmentMetadataUpdate{
			SegmentID: remotestorage.RemoteLogSegmentID{TopicIDPartition: d.gone, ID: d.s[5]}, EventTimestampMs: now, State: st, BrokerID: 2,
		}))
	}
	for _, st := range []remotestorage.RemotePartitionDeleteState{remotestorage.DeletePartitionStarted, remotestorage.DeletePartitionFinished} {
		require.NoError(t, m.PutRemotePartitionDeleteMetadata(ctx, remotestorage.RemotePartitionDeleteMetadata{
			TopicIDPartition: d.gone, State: st, EventTimestampMs: now, BrokerID: 2}))
	}
	return d
}

// svgElement is one element of a parsed SVG: its name, attributes and
// the classes of its ancestors.
type svgElement struct {
	name   string
	attrs  map[string]string
	parent *svgElement
}

// parseSVG checks that the SVG is well-formed XML and returns its elements.
func parseSVG(t *testing.T, data []byte) []*svgElement {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	var out, stack []*svgElement
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "the SVG is not well-formed XML")
		switch tok := tok.(type) {
		case xml.StartElement:
			e := &svgElement{name: tok.Name.Local, attrs: map[string]string{}}
			for _, a := range tok.Attr {
				e.attrs[a.Name.Local] = a.Value
			}
			if len(stack) > 0 {
				e.parent = stack[len(stack)-1]
			}
			if len(out) == 0 {
				require.Equal(t, "svg", e.name)
				require.Equal(t, "http://www.w3.org/2000/svg", tok.Name.Space)
			}
			out = append(out, e)
			stack = append(stack, e)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		}
	}
	require.Empty(t, stack)
	return out
}

func byClass(els []*svgElement, class string) []*svgElement {
	var out []*svgElement
	for _, e := range els {
		if e.attrs["class"] == class {
			out = append(out, e)
		}
	}
	return out
}

func attrFloat(t *testing.T, e *svgElement, name string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(e.attrs[name], 64)
	require.NoError(t, err, "%s=%q", name, e.attrs[name])
	return f
}

func attrInt(t *testing.T, e *svgElement, name string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(e.attrs[name], 10, 64)
	require.NoError(t, err, "%s=%q", name, e.attrs[name])
	return n
}

type E = map[remotestorage.LeaderEpoch]int64

func seg(start, end int64, st remotestorage.RemoteLogSegmentState, epochs E) plotSegment {
	return plotSegmentOf(remotestorage.RemoteLogSegmentMetadata{
		SegmentID:   remotestorage.RemoteLogSegmentID{ID: uuid.New()},
		StartOffset: start, EndOffset: end, State: st, SegmentLeaderEpochs: epochs})
}
