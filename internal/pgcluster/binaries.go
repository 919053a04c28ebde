package pgcluster

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ClientTool returns the path of a PostgreSQL client program (psql,
// pg_dump) of the given major version, or of any version when major is 0:
// from /usr/lib/postgresql/<major>/bin (Debian's postgresql-client-N
// installs there; the newest such directory when major is 0), else from
// PATH when its --version names that major. The embedded server bundles
// hold no client programs; `make pg-deps` installs Debian's
// postgresql-client-15.
func ClientTool(name string, major int) (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		a, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		b, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return a > b
	})
	for _, dir := range dirs {
		if major != 0 && filepath.Base(filepath.Dir(dir)) != strconv.Itoa(major) {
			continue
		}
		if p, err := exec.LookPath(filepath.Join(dir, name)); err == nil {
			return p, nil
		}
	}
	want := "a"
	pkg := "postgresql-client-15"
	if major != 0 {
		want = "PostgreSQL " + strconv.Itoa(major) + "'s"
		pkg = "postgresql-client-" + strconv.Itoa(major)
	}
	p, err := exec.LookPath(name)
	if err == nil && major != 0 {
		out, verr := exec.Command(p, "--version").Output()
		if verr != nil || !strings.Contains(string(out), ") "+strconv.Itoa(major)+".") {
			err = fmt.Errorf("%s --version: %q", p, strings.TrimSpace(string(out)))
		}
	}
	if err != nil {
		return "", fmt.Errorf("pgcluster: no %s %s (%v): install the PostgreSQL client programs (Debian: apt-get install %s; make pg-deps does)",
			want, name, err, pkg)
	}
	return p, nil
}
