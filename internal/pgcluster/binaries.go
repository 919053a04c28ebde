package pgcluster

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// FindBinDir returns the directory of the PostgreSQL server binaries:
// "pg_config --bindir" when pg_config is on PATH and that directory holds
// initdb, else the highest version under /usr/lib/postgresql/*/bin.
func FindBinDir() (string, error) {
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
		return "", errors.New("pgcluster: no PostgreSQL server binaries found " +
			"(neither pg_config --bindir nor /usr/lib/postgresql/*/bin has initdb, pg_ctl and postgres); " +
			"install them, e.g. apt-get install postgresql")
	}
	return best, nil
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
