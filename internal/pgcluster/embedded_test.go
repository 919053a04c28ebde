package pgcluster

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUnknownVersionNamesTheVersionsOnOffer(t *testing.T) {
	for _, v := range []string{"99", "9", "abc", "17.2"} {
		t.Setenv(EnvVersion, v)
		_, err := FindBinDir()
		require.ErrorContains(t, err, EnvVersion+`="`+v+`" is not a PostgreSQL major version on offer; use one of 10, 11, 12, 13, 14, 15, 16, 17, 18`)
		tmp := t.TempDir()
		t.Setenv("TMPDIR", tmp)
		_, err = Start(context.Background(), Options{})
		require.ErrorContains(t, err, "is not a PostgreSQL major version on offer")
		entries, err := os.ReadDir(tmp)
		require.NoError(t, err)
		require.Empty(t, entries, "nothing is created before the version is checked")
	}
	t.Setenv(EnvVersion, "")
	t.Setenv(EnvServer, "docker")
	_, err := FindBinDir()
	require.ErrorContains(t, err, `RLMM_PG_SERVER="docker": use embedded`)
}

// realJar returns the jar of the default release, fetched into the real
// cache if it is not there yet.
func realJar(t *testing.T) (cache, release string) {
	t.Helper()
	_, err := EmbeddedBinDir(t.Context(), DefaultMajor)
	require.NoError(t, err)
	cache, err = CacheDir()
	require.NoError(t, err)
	release = EmbeddedReleases[DefaultMajor]
	require.FileExists(t, jarPath(cache, release))
	return cache, release
}

func TestEmbeddedBinariesRunTheRelease(t *testing.T) {
	t.Parallel()
	for _, major := range []int{15, DefaultMajor} {
		dir, err := EmbeddedBinDir(t.Context(), major)
		require.NoError(t, err)
		out, err := exec.Command(filepath.Join(dir, "postgres"), "--version").CombinedOutput()
		require.NoError(t, err, string(out))
		require.Contains(t, string(out), "(PostgreSQL) "+strings.TrimSuffix(EmbeddedReleases[major], ".0"))
	}
}

// A jar that does not unpack (a download cut short) gives a clear error,
// leaves no bundle behind, and is deleted so that the next run fetches it
// again; with a whole jar in its place the next run succeeds.
func TestCorruptJarIsDeletedAndNothingIsUnpacked(t *testing.T) {
	t.Parallel()
	realCache, release := realJar(t)
	good, err := os.ReadFile(jarPath(realCache, release))
	require.NoError(t, err)

	cache := t.TempDir()
	jar := jarPath(cache, release)
	require.NoError(t, os.MkdirAll(filepath.Dir(jar), 0o755))
	// Cut inside the .txz: the zip's directory is gone.
	require.NoError(t, os.WriteFile(jar, good[:len(good)/2], 0o644))
	_, err = embeddedBinDir(t.Context(), cache, release)
	require.ErrorContains(t, err, "unpacking "+jar)
	require.ErrorContains(t, err, "the jar was deleted and the next run fetches it again")
	require.NoFileExists(t, jar)
	require.NoDirExists(t, filepath.Join(cache, release))
	leftovers, _ := filepath.Glob(filepath.Join(cache, "unpack-*"))
	require.Empty(t, leftovers)

	require.NoError(t, os.MkdirAll(filepath.Dir(jar), 0o755))
	require.NoError(t, os.WriteFile(jar, good, 0o644))
	dir, err := embeddedBinDir(t.Context(), cache, release)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(cache, release, "bin"), dir)
	require.True(t, complete(filepath.Join(cache, release), release))
}

// A bundle directory without its completion marker (unpacked by hand, or
// a file deleted since) is never run: it is deleted with a clear error.
func TestIncompleteBundleIsNeverRun(t *testing.T) {
	t.Parallel()
	cache := t.TempDir()
	release := EmbeddedReleases[DefaultMajor]
	bin := filepath.Join(cache, release, "bin")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	ran := filepath.Join(cache, "ran")
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		require.NoError(t, os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\ntouch "+ran+"\n"), 0o755))
	}
	// A stale unpacking directory of a killed process goes too.
	require.NoError(t, os.Mkdir(filepath.Join(cache, "unpack-123"), 0o700))

	_, err := embeddedBinDir(t.Context(), cache, release)
	require.ErrorContains(t, err, "was incomplete or corrupt; it was deleted and the next run fetches it again")
	require.NoDirExists(t, filepath.Join(cache, release))
	require.NoDirExists(t, filepath.Join(cache, "unpack-123"))
	require.NoFileExists(t, ran, "a binary of the incomplete bundle ran")

	// Complete but for one binary: the same.
	realCache, _ := realJar(t)
	require.NoError(t, os.CopyFS(filepath.Join(cache, release), os.DirFS(filepath.Join(realCache, release))))
	require.NoError(t, os.Remove(filepath.Join(bin, "pg_ctl")))
	_, err = embeddedBinDir(t.Context(), cache, release)
	require.ErrorContains(t, err, "was incomplete or corrupt")
	require.NoDirExists(t, filepath.Join(cache, release))
}

// A bundle whose entries would land outside it is refused.
func TestBundleEntriesStayInside(t *testing.T) {
	t.Parallel()
	for _, e := range []struct {
		h    tar.Header
		want string
	}{
		{tar.Header{Name: "../evil", Typeflag: tar.TypeReg, Mode: 0o644}, "points outside the bundle"},
		{tar.Header{Name: "/etc/evil", Typeflag: tar.TypeReg, Mode: 0o644}, "points outside the bundle"},
		{tar.Header{Name: "lib/x.so", Typeflag: tar.TypeSymlink, Linkname: "../../outside"}, "links outside the bundle"},
		{tar.Header{Name: "lib/y.so", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}, "links outside the bundle"},
		{tar.Header{Name: "bin/hard", Typeflag: tar.TypeLink, Linkname: "bin/postgres"}, "which the bundles do not use"},
	} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		require.NoError(t, tw.WriteHeader(&e.h))
		require.NoError(t, tw.Close())
		dst := t.TempDir()
		err := extractTar(tar.NewReader(&buf), dst)
		require.ErrorContains(t, err, e.want, e.h.Name)
	}
	// A link inside is fine.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "lib/libz.so", Typeflag: tar.TypeSymlink, Linkname: "libz.so.1"}))
	require.NoError(t, tw.Close())
	require.NoError(t, extractTar(tar.NewReader(&buf), t.TempDir()))
}

// A failed fetch says so, keeps nothing, and the next run tries again.
func TestFailedFetchKeepsNothing(t *testing.T) {
	fake := t.TempDir()
	calls := filepath.Join(fake, "calls")
	script := "#!/bin/sh\necho called >> " + calls + "\necho '[ERROR] Could not transfer artifact: connection refused' >&2\nexit 1\n"
	require.NoError(t, os.WriteFile(filepath.Join(fake, "mvn"), []byte(script), 0o755))
	t.Setenv("PATH", fake+string(os.PathListSeparator)+os.Getenv("PATH"))

	cache := t.TempDir()
	release := EmbeddedReleases[DefaultMajor]
	for i := 1; i <= 2; i++ {
		_, err := embeddedBinDir(t.Context(), cache, release)
		require.ErrorContains(t, err, "fetching PostgreSQL "+release)
		require.ErrorContains(t, err, "Could not transfer artifact: connection refused")
		require.ErrorContains(t, err, "nothing was kept; the next run tries again")
		require.NoDirExists(t, jarDir(cache, release))
		require.NoDirExists(t, filepath.Join(cache, release))
		b, err := os.ReadFile(calls)
		require.NoError(t, err)
		require.Equal(t, i, strings.Count(string(b), "called"), "run %d fetches again", i)
	}
}

// BenchmarkStart times Start (initdb, then the server up) and Stop on the
// default embedded release and, where installed, on the system's binaries,
// in the same run: go test -run '^$' -bench Start -benchtime 5x.
func BenchmarkStart(b *testing.B) {
	embedded, err := EmbeddedBinDir(b.Context(), DefaultMajor)
	require.NoError(b, err)
	embedded15, err := EmbeddedBinDir(b.Context(), 15)
	require.NoError(b, err)
	dirs := map[string]string{"embedded-" + EmbeddedReleases[DefaultMajor]: embedded, "embedded-" + EmbeddedReleases[15]: embedded15}
	if system, err := systemBinDir(); err == nil {
		dirs["system-"+filepath.Base(filepath.Dir(system))] = system
	}
	for name, dir := range dirs {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				c, err := Start(b.Context(), Options{BinDir: dir})
				require.NoError(b, err)
				require.NoError(b, c.Stop())
			}
		})
	}
}
