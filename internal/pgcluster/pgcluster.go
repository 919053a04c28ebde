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
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
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
	// TrustHosts are more client addresses pg_hba.conf trusts over TCP
	// (127.0.0.1 always is), such as a network namespace's end of a veth
	// pair; give listen_addresses in ExtraConf for the server to listen
	// where they reach it.
	TrustHosts []netip.Addr
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
	for _, a := range opts.TrustHosts {
		hba += fmt.Sprintf("host  all         all %s trust\n", netip.PrefixFrom(a, a.BitLen()))
	}
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

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgcluster: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
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
	_ = c.dismissWatchdog() // the server is down and its files go next
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
