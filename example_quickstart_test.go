package remotestorage_test

// The README's quick start is quickStart below, word for word
// (TestReadmeQuickStartIsTheExample), so it compiles; TestReadmeQuickStart
// runs it against a new database.

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
)

func quickStart(ctx context.Context, dsn string, topicID uuid.UUID) error {
	pool, err := remotestorage.NewPool(ctx, dsn) // connect backoff, timeouts, cancel requests
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := remotestorage.Migrate(ctx, pool); err != nil { // idempotent; brokers may race
		return err
	}
	m, err := remotestorage.NewPgManager(ctx, pool) // refuses an older schema, or a newer one not declared compatible
	if err != nil {
		return err
	}
	defer m.Close()

	tp := remotestorage.TopicIDPartition{TopicID: topicID, Topic: "orders", Partition: 0}
	id := remotestorage.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.New()}
	err = m.AddRemoteLogSegmentMetadata(ctx, remotestorage.RemoteLogSegmentMetadata{
		SegmentID:           id,
		StartOffset:         0,
		EndOffset:           99,
		SegmentSizeInBytes:  1 << 20,
		State:               remotestorage.CopySegmentStarted,
		SegmentLeaderEpochs: map[remotestorage.LeaderEpoch]int64{0: 0, 1: 60},
	})
	if err != nil {
		return err
	}
	// ... upload ...
	err = m.UpdateRemoteLogSegmentMetadata(ctx, remotestorage.RemoteLogSegmentMetadataUpdate{
		SegmentID: id, State: remotestorage.CopySegmentFinished, BrokerID: 1,
	})
	if err != nil {
		return err
	}
	seg, found, err := m.RemoteLogSegmentMetadata(ctx, tp, 1, 70) // the segment holding offset 70 of epoch 1
	if err != nil {
		return err
	}
	fmt.Println(found, seg.State, seg.StartOffset, seg.EndOffset) // true COPY_SEGMENT_FINISHED 0 99
	return nil
}

// The README's quick start: connect, migrate, add a segment, finish its
// upload and look up an offset.
func Example_quickStart() {
	if err := quickStart(context.Background(), os.Getenv("DATABASE_URL"), uuid.New()); err != nil {
		fmt.Println(err)
	}
}

// TestReadmeQuickStart runs the quick start on a database with no schema
// yet, as a broker's first start would, then reads back what it wrote.
func TestReadmeQuickStart(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewEmptyDatabase(t)
	topicID := uuid.New()
	require.NoError(t, quickStart(t.Context(), dsn, topicID))

	pool := newPool(t, dsn, 0, false)
	m := newManager(t, pool)
	list, err := m.ListRemoteLogSegments(t.Context(), remotestorage.TopicIDPartition{TopicID: topicID, Topic: "orders", Partition: 0})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, remotestorage.CopySegmentFinished, list[0].State)
	require.Equal(t, map[remotestorage.LeaderEpoch]int64{0: 0, 1: 60}, list[0].SegmentLeaderEpochs)
}

// TestReadmeQuickStartIsTheExample: the README's "Quick start" Go block is
// quickStart's declaration, as gofmt prints it in this file.
func TestReadmeQuickStartIsTheExample(t *testing.T) {
	t.Parallel()
	const file = "example_quickstart_test.go"
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, 0)
	require.NoError(t, err)
	var want string
	for _, decl := range f.Decls {
		if fn, ok := decl.(*ast.FuncDecl); ok && fn.Name.Name == "quickStart" {
			want = string(src[fset.Position(fn.Pos()).Offset:fset.Position(fn.End()).Offset])
		}
	}
	require.NotEmpty(t, want, "%s declares no quickStart", file)

	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	_, section, found := strings.Cut(string(readme), "\n## Quick start\n")
	require.True(t, found, `README.md has no "## Quick start" section`)
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, found := strings.Cut(section, "```go\n")
	require.True(t, found, "README.md's quick start has no ```go block")
	block, _, found = strings.Cut(block, "\n```\n")
	require.True(t, found, "README.md's quick start: unterminated ```go block")
	require.Equal(t, want, block, "README.md's quick start must be quickStart of %s, as written there", file)
}
