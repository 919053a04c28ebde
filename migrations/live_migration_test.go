package migrations_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/rstest"
	"github.com/krabka/remotestorage/internal/testwait"
	"github.com/krabka/remotestorage/migrations"
)

// liveStep is one migration applied under brokers of the code before it.
type liveStep struct {
	name      string // for the subtest
	oldCommit string // the code the brokers run
	oldSchema int64  // its schema version: the database starts there
	target    int64  // Migrate applies up to this version
	fsys      fs.FS  // the migrations; nil: the embedded ones
	// checkEpochEnds: after the migration, compare the new code's
	// EpochEndOffset with what the old brokers finished.
	checkEpochEnds bool
}

// moduleRoot is the module's directory, the top of its checkout: the
// tests of package migrations run in migrations/, and git's paths and the
// files copied into older trees are relative to the root.
const moduleRoot = ".."

// git runs git in the module's directory and returns its trimmed output.
func git(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", moduleRoot}, args...)...).Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			err = fmt.Errorf("%w: %s", err, exit.Stderr)
		}
		t.Fatalf("the migration tests build older commits of this module and need its full git history (a clone that is not shallow, with git on the PATH): git %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}

// schemaAt is the newest migration in the tree of commit.
func schemaAt(t *testing.T, commit string) int64 {
	t.Helper()
	var latest int64
	for _, name := range strings.Fields(git(t, "ls-tree", "--name-only", commit, "migrations/")) {
		var v int64
		if _, err := fmt.Sscanf(filepath.Base(name), "%d_", &v); err == nil && v > latest {
			latest = v
		}
	}
	return latest
}

// commitBefore is the commit before the one that added the migration file
// name on the first-parent history: the code that was running when it
// shipped. HEAD when it is not committed yet.
func commitBefore(t *testing.T, name string) string {
	t.Helper()
	if shallow := git(t, "rev-parse", "--is-shallow-repository"); shallow != "false" {
		t.Fatalf("the migration tests build older commits of this module and need its full git history; this clone is shallow (git fetch --unshallow)")
	}
	added := strings.Fields(git(t, "log", "--first-parent", "--diff-filter=A", "--format=%H", "HEAD", "--", "migrations/"+name))
	old := "HEAD"
	if len(added) > 0 {
		old = added[len(added)-1] + "^1"
	}
	return git(t, "rev-parse", "--verify", old+"^{commit}")
}

// liveSteps plans the test: for each migration after release 1's
// baseline, the commit before the one that added it on the first-parent
// history (the code that was running when it shipped; this commit when it
// is not committed yet); then the oldest of those codes kept running while
// Migrate takes its schema to the newest, checked for what it finished.
// And, whatever ships, a test-only next migration of the kind a release
// adds (columns on the data tables and a function, in the migration's
// transaction behind the prelude) under brokers of this commit.
func liveSteps(t *testing.T) []liveStep {
	t.Helper()
	names, err := fs.Glob(migrations.FS(), "*.sql")
	require.NoError(t, err)
	var steps []liveStep
	for _, name := range names {
		var v int64
		_, err := fmt.Sscanf(name, "%d_", &v)
		require.NoError(t, err)
		if v <= migrations.Baseline {
			continue
		}
		old := commitBefore(t, name)
		steps = append(steps, liveStep{name: fmt.Sprintf("%05d", v), oldCommit: old, oldSchema: schemaAt(t, old), target: v})
	}
	if len(steps) > 0 {
		require.Less(t, steps[0].oldSchema, steps[0].target)
		steps = append(steps, liveStep{
			name: fmt.Sprintf("schema %d to %d", steps[0].oldSchema, rs.SchemaVersion), oldCommit: steps[0].oldCommit,
			oldSchema: steps[0].oldSchema, target: rs.SchemaVersion, checkEpochEnds: true,
		})
	}
	steps = append(steps, liveStep{
		name: "a next migration", oldCommit: git(t, "rev-parse", "--verify", "HEAD^{commit}"),
		oldSchema: rs.SchemaVersion, target: rs.SchemaVersion + 1, checkEpochEnds: true,
		fsys: withNext(t, fmt.Sprintf(`-- rlmm:compatible-with %d
-- +goose Up
ALTER TABLE rlmm_segments ADD COLUMN live_test_note text;
ALTER TABLE rlmm_segment_epochs ADD COLUMN live_test_note text;
ALTER TABLE rlmm_epoch_ends ADD COLUMN live_test_note text;
CREATE FUNCTION rlmm_live_test() RETURNS bigint LANGUAGE sql AS 'SELECT count(*) FROM rlmm_partitions';
-- +goose Down
DROP FUNCTION rlmm_live_test();
ALTER TABLE rlmm_epoch_ends DROP COLUMN live_test_note;
ALTER TABLE rlmm_segment_epochs DROP COLUMN live_test_note;
ALTER TABLE rlmm_segments DROP COLUMN live_test_note;
`, rs.SchemaVersion)),
	})
	return steps
}

// oldProgram is a program of this checkout built against the tree of an
// older commit: it links that commit's code.
type oldProgram struct {
	name string // the binary's name, for errors
	// files maps a path in the old tree to the file or directory of this
	// checkout (relative to its root) copied there (of a directory, the Go
	// files that are not tests, its subdirectories' included).
	files map[string]string
	pkg   string // the package to build, relative to the old tree
}

// liveBroker is the driver of TestMigrationsUnderLiveBrokers.
var liveBroker = oldProgram{
	name:  "livebroker",
	files: map[string]string{"cmd/livebroker/main.go": "testdata/livebroker/main.go"},
	pkg:   "./cmd/livebroker",
}

// buildOld builds p against the tree of commit, in a directory of its own
// under root, and returns the binary.
func buildOld(root, commit string, p oldProgram) (string, error) {
	dir, err := os.MkdirTemp(root, "commit-")
	if err != nil {
		return "", err
	}
	archive := exec.Command("git", "-C", moduleRoot, "archive", "--format=tar", commit)
	var stderr bytes.Buffer
	archive.Stderr = &stderr
	out, err := archive.Output()
	if err != nil {
		return "", fmt.Errorf("git archive %s: %w: %s", commit, err, stderr.String())
	}
	tr := tar.NewReader(bytes.NewReader(out))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", err
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return "", err
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return "", err
		}
	}
	for to, from := range p.files {
		if err := copyIntoTree(filepath.Join(moduleRoot, filepath.FromSlash(from)), filepath.Join(dir, filepath.FromSlash(to))); err != nil {
			return "", err
		}
	}
	bin := filepath.Join(dir, p.name)
	build := exec.Command("go", "build", "-buildvcs=false", "-o", bin, p.pkg)
	build.Dir = dir
	build.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s against commit %s: %w: %s", p.name, commit, err, b)
	}
	return bin, nil
}

// copyIntoTree copies the file from to the path to; a directory's Go files
// other than tests, its subdirectories' included.
func copyIntoTree(from, to string) error {
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if path != from && (!strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go")) {
			return nil
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
}

// liveLine is a line of the driver's output (testdata/livebroker).
type liveLine struct {
	Broker    int              `json:"broker"`
	Op        string           `json:"op"`
	Err       string           `json:"err"`
	Code      string           `json:"code"`
	Rounds    int64            `json:"rounds"`
	TopicID   string           `json:"topic_id"`
	Partition int32            `json:"partition"`
	EpochEnds map[string]int64 `json:"epoch_ends"`
	Done      bool             `json:"done"`
}

// Each migration after release 1's baseline, and a test-only next
// migration (liveSteps), applied while brokers running the code of the
// schema before it (built from its commit, in processes of their own)
// write and read as fast as they can: Migrate succeeds, and none of the
// brokers' calls fails. A deadlock between the migration's locks and the
// brokers' is what this catches: no error is accepted, not even one a
// broker could retry. Then the oldest of those codes runs while the
// database is taken to the newest schema, and what it finished counts for
// the new code's EpochEndOffset.
func TestMigrationsUnderLiveBrokers(t *testing.T) {
	t.Parallel()
	steps := liveSteps(t)
	root := t.TempDir()
	builds := map[string]func() (string, error){}
	for _, step := range steps {
		if builds[step.oldCommit] == nil {
			builds[step.oldCommit] = sync.OnceValues(func() (string, error) { return buildOld(root, step.oldCommit, liveBroker) })
		}
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			t.Parallel()
			bin, err := builds[step.oldCommit]()
			require.NoError(t, err)
			runLiveStep(t, step, bin)
		})
	}
}

func runLiveStep(t *testing.T, step liveStep, bin string) {
	ctx := t.Context()
	dsn := pgtest.NewEmptyDatabase(t)
	admin := rstest.NewPool(t, dsn, 0, false)
	fsys := step.fsys
	if fsys == nil {
		fsys = migrations.FS()
	}
	require.NoError(t, rstest.MigrateFSTo(ctx, admin, fsys, step.oldSchema))

	cmd := exec.Command(bin, "-dsn", dsn, "-brokers", "3")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})

	// The driver's lines, read as they come.
	var (
		lmu      sync.Mutex
		failures []liveLine
		finals   []liveLine
		rounds   int64
		done     = make(chan struct{})
		progress = make(chan struct{}, 1)
	)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var l liveLine
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			lmu.Lock()
			switch {
			case l.Err != "" || l.Op != "":
				failures = append(failures, l)
			case l.TopicID != "":
				finals = append(finals, l)
			case l.Broker == -1:
				rounds = l.Rounds
			}
			lmu.Unlock()
			select {
			case progress <- struct{}{}:
			default:
			}
		}
	}()
	waitRounds := func(n int64, what string) {
		t.Helper()
		wait := testwait.Timeout(t)
		timeout := time.After(wait)
		for {
			lmu.Lock()
			r, failed := rounds, len(failures)
			lmu.Unlock()
			if r >= n || failed > 0 {
				return
			}
			select {
			case <-progress:
			case <-done:
				t.Fatalf("the old brokers stopped before %s: %s", what, stderr.String())
			case <-timeout:
				t.Fatalf("the old brokers did not reach %d rounds (%s) within %v; %d so far", n, what, wait, r)
			}
		}
	}
	waitRounds(30, "the migration")
	lmu.Lock()
	before := rounds
	lmu.Unlock()
	start := time.Now()
	require.NoError(t, rstest.MigrateFSTo(ctx, admin, fsys, step.target), "Migrate to %d under brokers of commit %s (schema %d)", step.target, step.oldCommit, step.oldSchema)
	took := time.Since(start)
	lmu.Lock()
	during := rounds - before
	lmu.Unlock()
	after := int64(30)
	if step.checkEpochEnds {
		after = 300 // two epochs of each broker on the new schema
	}
	waitRounds(before+during+after, "the end")
	require.NoError(t, stdin.Close())
	<-done
	require.NoError(t, cmd.Wait(), stderr.String())

	lmu.Lock()
	defer lmu.Unlock()
	for _, f := range failures {
		t.Errorf("broker %d on the code of schema %d (commit %.12s): %s failed while migrating to %d: %s (SQLSTATE %q)", f.Broker, step.oldSchema, step.oldCommit, f.Op, step.target, f.Err, f.Code)
	}
	t.Logf("schema %d -> %d in %s while the brokers of schema %d made %d rounds (%d in all)", step.oldSchema, step.target, took.Round(time.Millisecond), step.oldSchema, during, rounds)
	var version int64
	require.NoError(t, admin.QueryRow(ctx, "SELECT max(version_id) FROM "+migrations.VersionTable+" WHERE is_applied").Scan(&version))
	require.Equal(t, step.target, version)
	if !step.checkEpochEnds {
		return
	}
	m, err := rs.NewPgManager(ctx, admin)
	require.NoError(t, err)
	defer m.Close()
	require.Len(t, finals, 3)
	for _, f := range finals {
		tp := rs.TopicIDPartition{TopicID: uuid.MustParse(f.TopicID), Topic: "live", Partition: f.Partition}
		epochs := slices.Collect(maps.Keys(f.EpochEnds))
		require.GreaterOrEqual(t, len(epochs), 2, "the broker finished segments in several epochs")
		for _, e := range epochs {
			epoch, err := strconv.Atoi(e)
			require.NoError(t, err)
			got, found, err := m.EpochEndOffset(ctx, tp, rs.LeaderEpoch(epoch))
			require.NoError(t, err)
			require.True(t, found, "EpochEndOffset(%d) of %s", epoch, tp)
			require.Equal(t, f.EpochEnds[e], got, "EpochEndOffset(%d) of %s: the old code's finishes count", epoch, tp)
		}
	}
}
