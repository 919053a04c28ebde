// Package pgcluster starts and stops a throwaway PostgreSQL cluster from the
// server binaries installed on this machine, for tests, benchmarks and demos.
//
// [Start] runs initdb into a fresh temporary directory and starts the server
// with pg_ctl. The server listens on a unix socket in a private temporary
// directory and, with [Options.TCP], also on 127.0.0.1 at a free port.
// Authentication is trust and the superuser is "postgres".
//
// Nothing is tuned away from durability: fsync, full_page_writes and
// synchronous_commit keep their defaults, so crash tests ([Cluster.Kill],
// [Cluster.Shutdown] with [Immediate], then [Cluster.Startup]) see what
// production would see. Only shared_buffers and max_connections are raised;
// [Options.ExtraConf] overrides anything.
//
// # Running as root
//
// PostgreSQL refuses to run as root. When the calling process is root (CI
// containers, this project's machines) every binary runs as the OS user
// "postgres", and the temporary directories are chowned to it. Create that
// user if it is missing (useradd postgres); Debian's postgresql packages do.
//
// # Nothing left behind
//
// [Cluster.Stop] stops the server and removes every file; it is idempotent.
// If the owning process dies without calling it (SIGKILL, a test timeout),
// a small watchdog shell process notices that its stdin pipe from the owner
// has closed, stops the server with "pg_ctl stop -m immediate" and removes
// the directory.
package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options configures [Start].
type Options struct {
	// TCP makes the server also listen on 127.0.0.1 at a free port
	// (see [Cluster.TCPURL]); fault-injection proxies need a TCP upstream.
	TCP bool
	// ExtraConf holds postgresql.conf settings applied after the defaults,
	// e.g. {"synchronous_commit": "off"}. Values are quoted for you.
	ExtraConf map[string]string
	// BinDir is the directory holding initdb, pg_ctl and postgres.
	// Empty means [FindBinDir].
	BinDir string
	// TLSCert and TLSKey, PEM, turn on TLS (ssl=on) with this server
	// certificate and key (see [CA]). Clients may still connect without
	// TLS; sslmode=verify-full makes them insist and check the certificate.
	TLSCert, TLSKey []byte
}

// ShutdownMode is a pg_ctl stop mode.
type ShutdownMode string

// The pg_ctl shutdown modes.
const (
	// Smart waits for every client to disconnect.
	Smart ShutdownMode = "smart"
	// Fast terminates sessions (FATAL 57P01) and shuts down cleanly.
	Fast ShutdownMode = "fast"
	// Immediate quits without a checkpoint: the next start runs crash recovery.
	Immediate ShutdownMode = "immediate"
)

// defaultConf are the settings every cluster gets before Options.ExtraConf.
var defaultConf = map[string]string{
	"shared_buffers":  "128MB",
	"max_connections": "300",
}

// unixPort is the port number in the socket file name when the cluster does
// not listen on TCP; the socket directory is private, so it never collides.
const unixPort = 5432

// startTimeout bounds one "pg_ctl start -w"; crash recovery is included.
const startTimeout = 60 * time.Second

// Cluster is a running (or stopped) throwaway PostgreSQL cluster.
// Its methods are safe for concurrent use.
type Cluster struct {
	binDir    string
	baseDir   string // holds data/, the log and usually the socket dir
	dataDir   string
	socketDir string
	logFile   string
	port      int
	tcp       bool
	cred      *syscall.Credential // nil: run as the current user
	extraConf map[string]string   // Options.ExtraConf, for rewriting pgcluster.conf

	mu       sync.Mutex
	removed  bool
	watchdog *exec.Cmd
	wdStdin  io.WriteCloser
}

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

// Start creates a cluster with initdb in a new temporary directory and starts
// it. On error nothing is left running or on disk. Call [Cluster.Stop] when
// done.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	c, err := prepare(opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()

	// -N (no fsync of the new files) only skips initdb's final sync; the
	// server itself keeps fsync=on.
	if _, err := c.run(ctx, "initdb", "-D", c.dataDir, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "-N"); err != nil {
		return nil, err
	}
	hba := "# Written by pgcluster: a throwaway test cluster.\n" +
		"local all         all              trust\n" +
		"host  all         all 127.0.0.1/32 trust\n" +
		"local replication all              trust\n" +
		"host  replication all 127.0.0.1/32 trust\n"
	if err := c.writeFile(filepath.Join(c.dataDir, "pg_hba.conf"), hba); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(c.dataDir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	_, err = f.WriteString("\ninclude 'pgcluster.conf'\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}

	if opts.TLSCert != nil {
		if opts.ExtraConf, err = c.writeTLS(opts); err != nil {
			return nil, err
		}
	}

	// A free TCP port can be taken by someone else before the server binds
	// it; try a few.
	for attempt := 0; ; attempt++ {
		if opts.TCP {
			if c.port, err = freePort(); err != nil {
				return nil, err
			}
		}
		c.extraConf = opts.ExtraConf
		if err := c.writeFile(filepath.Join(c.dataDir, "pgcluster.conf"), c.conf(opts.ExtraConf)); err != nil {
			return nil, err
		}
		err = c.Startup(ctx)
		if err == nil {
			return c, nil
		}
		if !opts.TCP || attempt == 2 || !strings.Contains(err.Error(), "could not bind") {
			return nil, err
		}
		_ = os.Truncate(c.logFile, 0)
	}
}

// prepare makes the directories of a new cluster, owned by the server user,
// and starts the watchdog. On error nothing is left behind.
func prepare(opts Options) (_ *Cluster, err error) {
	binDir := opts.BinDir
	if binDir == "" {
		if binDir, err = FindBinDir(); err != nil {
			return nil, err
		}
	}
	cred, err := serverCredential()
	if err != nil {
		return nil, err
	}

	baseDir, err := os.MkdirTemp("", "pgcluster-")
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	c := &Cluster{
		binDir:    binDir,
		baseDir:   baseDir,
		dataDir:   filepath.Join(baseDir, "data"),
		socketDir: filepath.Join(baseDir, "sock"),
		logFile:   filepath.Join(baseDir, "postgres.log"),
		port:      unixPort,
		tcp:       opts.TCP,
		cred:      cred,
	}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()

	// A unix socket path is limited to 107 bytes; a long TMPDIR (macOS) would
	// exceed it, so put the socket directory under /tmp then.
	if len(c.socketDir)+len("/.s.PGSQL.65535") > 100 {
		if c.socketDir, err = os.MkdirTemp("/tmp", "pgsock-"); err != nil {
			return nil, fmt.Errorf("pgcluster: %w", err)
		}
	} else if err = os.Mkdir(c.socketDir, 0o700); err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	if cred != nil {
		for _, dir := range []string{c.baseDir, c.socketDir} {
			if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, fmt.Errorf("pgcluster: %w", err)
			}
			if err := checkReachable(dir, cred); err != nil {
				return nil, err
			}
		}
	}

	// Started before initdb so a crash of the owner from here on is cleaned up.
	if err := c.startWatchdog(); err != nil {
		return nil, err
	}
	return c, nil
}

// StartStandby starts a hot standby of primary: a base backup taken with
// pg_basebackup -R (so it streams from primary), in a new temporary
// directory, on its own socket (and TCP port with Options.TCP). Call
// [Cluster.Stop] when done; stop the standby before the primary.
func StartStandby(ctx context.Context, primary *Cluster, opts Options) (_ *Cluster, err error) {
	if opts.BinDir == "" {
		opts.BinDir = primary.binDir
	}
	c, err := prepare(opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()
	if _, err := c.run(ctx, "pg_basebackup", "-D", c.dataDir, "-R", "-X", "stream", "-c", "fast",
		"-h", primary.socketDir, "-p", strconv.Itoa(primary.port), "-U", "postgres"); err != nil {
		return nil, err
	}
	if opts.TCP {
		if c.port, err = freePort(); err != nil {
			return nil, err
		}
	}
	// The backup carries the primary's pgcluster.conf: this one's listen
	// settings replace it.
	if err := c.writeFile(filepath.Join(c.dataDir, "pgcluster.conf"), c.conf(opts.ExtraConf)); err != nil {
		return nil, err
	}
	if err := c.Startup(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

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

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgcluster: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// writeTLS writes the server certificate and key into the data directory
// (the key readable by the server user only, as PostgreSQL demands) and
// returns opts.ExtraConf with the settings that use them.
func (c *Cluster) writeTLS(opts Options) (map[string]string, error) {
	cert, key := filepath.Join(c.dataDir, "server.crt"), filepath.Join(c.dataDir, "server.key")
	if err := c.writeFile(cert, string(opts.TLSCert)); err != nil {
		return nil, err
	}
	if err := c.writeFile(key, string(opts.TLSKey)); err != nil {
		return nil, err
	}
	conf := map[string]string{"ssl": "on", "ssl_cert_file": cert, "ssl_key_file": key}
	maps.Copy(conf, opts.ExtraConf)
	return conf, nil
}

// conf renders pgcluster.conf: listen settings, defaults, then extra.
func (c *Cluster) conf(extra map[string]string) string {
	listen := ""
	if c.tcp {
		listen = "127.0.0.1"
	}
	settings := map[string]string{
		"listen_addresses":        listen,
		"port":                    strconv.Itoa(c.port),
		"unix_socket_directories": c.socketDir,
	}
	maps.Copy(settings, defaultConf)
	maps.Copy(settings, extra)
	var b strings.Builder
	b.WriteString("# Written by pgcluster; included last from postgresql.conf.\n")
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		fmt.Fprintf(&b, "%s = '%s'\n", k, strings.ReplaceAll(settings[k], "'", "''"))
	}
	return b.String()
}

// writeFile writes a file the server user owns.
func (c *Cluster) writeFile(name, content string) error {
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if c.cred != nil {
		if err := os.Chown(name, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
	}
	return nil
}

// command builds a command that runs as the server user in baseDir, with no
// PG* variables from our environment.
func (c *Cluster) command(ctx context.Context, path string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = c.baseDir
	env := []string{"HOME=" + c.baseDir, "LC_ALL=C", "PGDATA=" + c.dataDir}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") && !strings.HasPrefix(kv, "HOME=") &&
			!strings.HasPrefix(kv, "LC_") && !strings.HasPrefix(kv, "LANG") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	// A server started without -l would keep our output pipes open.
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// run runs one of the cluster's binaries and returns its combined output.
func (c *Cluster) run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := c.command(ctx, filepath.Join(c.binDir, name), args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("pgcluster: %s %s: %w\n%s", name, strings.Join(args, " "), err,
			strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// startWatchdog starts a shell, as the server user and in its own process
// group (so a terminal's ^C reaches only us), that waits on a pipe from this
// process. "detach" on the pipe makes it exit; EOF (we died) makes it stop the
// server and remove the directories.
func (c *Cluster) startWatchdog() error {
	sh, err := exec.LookPath("sh")
	if err != nil {
		return nil // best effort: Stop still cleans up
	}
	script := `read -r line; [ "$line" = detach ] && exit 0
"$0" stop -D "$1" -m immediate -w -t 30 >/dev/null 2>&1
rm -rf "$2" "$3"`
	cmd := c.command(context.Background(), sh, "-c", script,
		filepath.Join(c.binDir, "pg_ctl"), c.dataDir, c.baseDir, c.socketDir)
	cmd.SysProcAttr.Setpgid = true
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("pgcluster: watchdog: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgcluster: watchdog: %w", err)
	}
	c.watchdog, c.wdStdin = cmd, stdin
	return nil
}

// Startup starts the server on the existing data directory and waits until it
// accepts connections, crash recovery included. The error includes the tail
// of the server log.
func (c *Cluster) Startup(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.removed {
		return errors.New("pgcluster: cluster already stopped and removed")
	}
	_, err := c.run(ctx, "pg_ctl", "start", "-D", c.dataDir, "-l", c.logFile, "-w",
		"-t", strconv.Itoa(int(startTimeout/time.Second)), "-s")
	if err != nil {
		return fmt.Errorf("%w\nserver log (%s), last lines:\n%s", err, c.logFile, c.logTail(30))
	}
	return nil
}

// Shutdown stops the server with pg_ctl stop -m mode and waits for it to exit,
// keeping the data directory for [Cluster.Startup]. Stopping a stopped server
// is not an error.
func (c *Cluster) Shutdown(ctx context.Context, mode ShutdownMode) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.shutdown(ctx, mode)
}

func (c *Cluster) shutdown(ctx context.Context, mode ShutdownMode) error {
	if c.pid() == 0 {
		return nil
	}
	_, err := c.run(ctx, "pg_ctl", "stop", "-D", c.dataDir, "-m", string(mode), "-w", "-t", "60", "-s")
	if err != nil && c.pid() == 0 {
		return nil // it stopped by itself meanwhile
	}
	return err
}

// Restart stops the server with mode and starts it again on the same data
// directory, socket and port.
func (c *Cluster) Restart(ctx context.Context, mode ShutdownMode) error {
	if err := c.Shutdown(ctx, mode); err != nil {
		return err
	}
	return c.Startup(ctx)
}

// Kill sends SIGKILL to the postmaster, as the OOM killer would, and waits
// until no server process of the cluster is left (the backends notice the
// postmaster's death and exit). [Cluster.Startup] then runs crash recovery.
func (c *Cluster) Kill(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	pid := c.pid()
	if pid == 0 {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("pgcluster: kill postmaster %d: %w", pid, err)
	}
	// Backends hold the data directory until they exit, and a new postmaster
	// refuses to start while they do, or while the old pid exists at all: it
	// checks with kill(pid, 0), which succeeds on a zombie not yet reaped by
	// init. If the zombie stays (an init that does not reap), remove the
	// stale lock file, which is safe once every process is dead.
	deadSince := time.Time{}
	for {
		if !processAlive(pid) && !c.backendsAlive() {
			if syscall.Kill(pid, 0) != nil {
				return nil
			}
			if deadSince.IsZero() {
				deadSince = time.Now()
			} else if time.Since(deadSince) > 3*time.Second {
				if err := os.Remove(filepath.Join(c.dataDir, "postmaster.pid")); err != nil {
					return fmt.Errorf("pgcluster: %w", err)
				}
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgcluster: waiting for the killed server to exit: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// backendsAlive reports whether a process still works in our data directory
// (every server process chdirs there). It reads /proc; elsewhere it reports
// false.
func (c *Cluster) backendsAlive() bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err == nil && cwd == c.dataDir && processAlive(pid) {
			return true
		}
	}
	return false
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	// A zombie is dead for our purposes.
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}

// pid returns the postmaster's pid from postmaster.pid, or 0 when the server
// is not running.
func (c *Cluster) pid() int {
	b, err := os.ReadFile(filepath.Join(c.dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 || !processAlive(pid) {
		return 0
	}
	return pid
}

// Running reports whether the postmaster is running.
func (c *Cluster) Running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pid() != 0
}

// PgCtl runs pg_ctl as the server user with PGDATA set to the data directory
// and returns its combined output, e.g. PgCtl(ctx, "status"). Give "start"
// a "-l" log file, or the server's output holds pg_ctl's pipe open.
func (c *Cluster) PgCtl(ctx context.Context, args ...string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.run(ctx, "pg_ctl", args...)
}

// Stop stops the server (fast, falling back to immediate, then SIGKILL) and
// removes the data, socket and log. It is idempotent and safe to call on a
// half-started cluster; the first call does the work.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.removed {
		return nil
	}
	c.removed = true
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var errs []error
	if err := c.shutdown(ctx, Fast); err != nil {
		errs = append(errs, err)
		if err := c.shutdown(ctx, Immediate); err != nil {
			errs = append(errs, err)
			if pid := c.pid(); pid != 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	if c.watchdog != nil {
		_, _ = io.WriteString(c.wdStdin, "detach\n")
		_ = c.wdStdin.Close()
		_ = c.watchdog.Wait()
		c.watchdog = nil
	}
	for _, dir := range []string{c.baseDir, c.socketDir} {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("pgcluster: %w", err))
		}
	}
	if c.pid() != 0 {
		errs = append(errs, errors.New("pgcluster: the server is still running"))
	}
	return errors.Join(errs...)
}

// Detach leaves the server running after this process exits (rlmmctl demo
// --keep): the watchdog is dismissed and Stop becomes a no-op. Stopping and
// removing the cluster is then the caller's business (pg_ctl stop, rm -rf).
func (c *Cluster) Detach() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.removed {
		return errors.New("pgcluster: cluster already stopped and removed")
	}
	c.removed = true
	if c.watchdog != nil {
		_, _ = io.WriteString(c.wdStdin, "detach\n")
		_ = c.wdStdin.Close()
		err := c.watchdog.Wait()
		c.watchdog = nil
		if err != nil {
			return fmt.Errorf("pgcluster: watchdog: %w", err)
		}
	}
	return nil
}

// URL returns a pgx DSN for dbname over the unix socket, e.g.
// postgres://postgres@/app?host=%2Ftmp%2Fpgcluster-1%2Fsock&port=5432&sslmode=disable.
func (c *Cluster) URL(dbname string) string {
	q := url.Values{}
	q.Set("host", c.socketDir)
	q.Set("port", strconv.Itoa(c.port))
	q.Set("sslmode", "disable")
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Path: "/" + dbname, RawQuery: q.Encode()}
	return u.String()
}

// TCPURL returns a pgx DSN for dbname over 127.0.0.1. It panics when the
// cluster was started without [Options.TCP].
func (c *Cluster) TCPURL(dbname string) string {
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Host: c.TCPAddr(), Path: "/" + dbname,
		RawQuery: "sslmode=disable"}
	return u.String()
}

// TCPAddr returns the server's TCP address, "127.0.0.1:port". It panics when
// the cluster was started without [Options.TCP].
func (c *Cluster) TCPAddr() string {
	if !c.tcp {
		panic("pgcluster: TCP address of a cluster started without Options.TCP")
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port))
}

// Port returns the server's port; with TCP off it only names the socket file.
func (c *Cluster) Port() int { return c.port }

// SocketDir returns the directory of the server's unix socket.
func (c *Cluster) SocketDir() string { return c.socketDir }

// DataDir returns the data directory.
func (c *Cluster) DataDir() string { return c.dataDir }

// BinDir returns the directory of the server binaries in use.
func (c *Cluster) BinDir() string { return c.binDir }

// LogFile returns the path of the server log.
func (c *Cluster) LogFile() string { return c.logFile }

// logTail returns the last n lines of the server log.
func (c *Cluster) logTail(n int) string {
	b, err := os.ReadFile(c.logFile)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
