package pgcluster

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// serverCredential returns whom to run the binaries as: nil (the current
// user) unless we are root, then the "postgres" OS user.
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgcluster: running as root, and PostgreSQL refuses to run as root; "+
			"an unprivileged OS user named \"postgres\" is needed to run it (create one: useradd postgres): %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("pgcluster: user postgres: %w", err)
	}
	if uid == 0 {
		return nil, errors.New("pgcluster: the OS user \"postgres\" has uid 0; PostgreSQL refuses to run as root")
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// checkReachable reports a clear error when the server user cannot traverse
// every parent of dir (a TMPDIR under /root, say); initdb would fail later
// with a less obvious message.
func checkReachable(dir string, cred *syscall.Credential) error {
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
		mode := fi.Mode().Perm()
		ok := mode&0o001 != 0
		if st, isUnix := fi.Sys().(*syscall.Stat_t); isUnix {
			ok = ok || (st.Uid == cred.Uid && mode&0o100 != 0) || (st.Gid == cred.Gid && mode&0o010 != 0)
		}
		if !ok {
			return fmt.Errorf("pgcluster: the server user (uid %d) cannot reach %s because %s has mode %v; "+
				"set TMPDIR to a directory it can traverse, such as /tmp", cred.Uid, dir, p, mode)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}
