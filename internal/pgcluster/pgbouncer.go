package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
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

// BouncerBinary is where Debian's pgbouncer package installs the binary.
const BouncerBinary = "/usr/sbin/pgbouncer"

// BouncerOptions configures [StartBouncer].
type BouncerOptions struct {
	// Host and Port are the upstream server: a unix socket directory or an
	// IP address, and its port.
	Host string
	Port int
	// User (and Password, when the server asks for one) is whom PgBouncer
	// logs in as; every client shares it (auth_type=any).
	User, Password string
	// PoolMode is session, transaction or statement; empty: transaction,
	// the mode that breaks session state and that production poolers run.
	PoolMode string
	// Extra holds pgbouncer.ini [pgbouncer] settings applied after the
	// defaults, e.g. {"default_pool_size": "5"}.
	Extra map[string]string
	// Binary is the pgbouncer executable; empty: [BouncerBinary], else
	// pgbouncer on PATH.
	Binary string
}

// Bouncer is a running PgBouncer in front of a server, listening on
// 127.0.0.1 at a free port. Every database of the server is reachable
// through it under its own name.
type Bouncer struct {
	dir  string
	port int
	cmd  *exec.Cmd
	// stdin of the wrapper shell: closing it stops pgbouncer, and so does
	// our death.
	stdin io.WriteCloser
	exit  chan struct{}

	mu      sync.Mutex
	stopped bool
}

// FindBouncer returns the pgbouncer binary: BouncerBinary, else pgbouncer on
// PATH, else an error saying how to install it.
func FindBouncer() (string, error) {
	if fi, err := os.Stat(BouncerBinary); err == nil && !fi.IsDir() {
		return BouncerBinary, nil
	}
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	return "", errors.New("pgcluster: pgbouncer not found (neither " + BouncerBinary +
		" nor pgbouncer on PATH); install it: make test-deps, or apt-get install -y pgbouncer")
}

// StartBouncer starts PgBouncer in front of the server opts names and waits
// until it accepts connections. It runs as the OS user postgres when we are
// root (PgBouncer refuses to run as root). If this process dies, PgBouncer
// exits too. Call [Bouncer.Stop] when done.
func StartBouncer(ctx context.Context, opts BouncerOptions) (_ *Bouncer, err error) {
	bin := opts.Binary
	if bin == "" {
		if bin, err = FindBouncer(); err != nil {
			return nil, err
		}
	}
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("pgcluster: pgbouncer binary %s is missing or not executable; install it: make test-deps, or apt-get install -y pgbouncer", bin)
	}
	if opts.PoolMode == "" {
		opts.PoolMode = "transaction"
	}
	cred, err := serverCredential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgbouncer-")
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	b := &Bouncer{dir: dir, exit: make(chan struct{})}
	defer func() {
		if err != nil {
			_ = b.Stop()
		}
	}()
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("pgcluster: %w", err)
		}
		if err := checkReachable(dir, cred); err != nil {
			return nil, err
		}
	}
	if b.port, err = freePort(); err != nil {
		return nil, err
	}
	ini := filepath.Join(dir, "pgbouncer.ini")
	if err := writeOwned(ini, bouncerINI(dir, b.port, opts), cred); err != nil {
		return nil, err
	}

	// The shell exits with pgbouncer; a subshell reads our pipe until EOF
	// (Stop, or our death), then stops pgbouncer with SIGTERM (immediate
	// shutdown). (A background list's stdin is /dev/null unless redirected:
	// hence fd 3.)
	script := `exec 3<&0
"$0" "$1" </dev/null & pid=$!
(cat <&3 >/dev/null; kill -TERM "$pid" 2>/dev/null) &
wait "$pid"`
	cmd := exec.Command("sh", "-c", script, bin, ini)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("pgcluster: pgbouncer: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("pgcluster: start pgbouncer: %w", err)
	}
	b.cmd, b.stdin = cmd, stdin
	go func() {
		_ = cmd.Wait()
		close(b.exit)
	}()

	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", b.Addr(), time.Second)
		if err == nil {
			conn.Close()
			return b, nil
		}
		select {
		case <-b.exit:
			return nil, fmt.Errorf("pgcluster: pgbouncer exited at start; log %s:\n%s", b.LogFile(), tail(b.LogFile(), 20))
		case <-ctx.Done():
			return nil, fmt.Errorf("pgcluster: waiting for pgbouncer: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("pgcluster: pgbouncer does not accept connections after 30 s; log %s:\n%s", b.LogFile(), tail(b.LogFile(), 20))
		}
	}
}

// bouncerINI renders pgbouncer.ini: every database name maps to the same
// name upstream, clients are not authenticated (auth_type=any: the server
// side logs in as opts.User), and the pool mode is opts.PoolMode.
func bouncerINI(dir string, port int, opts BouncerOptions) string {
	upstream := fmt.Sprintf("host=%s port=%d user=%s", opts.Host, opts.Port, opts.User)
	if opts.Password != "" {
		upstream += " password=" + opts.Password
	}
	settings := map[string]string{
		"listen_addr":     "127.0.0.1",
		"listen_port":     strconv.Itoa(port),
		"unix_socket_dir": "",
		"auth_type":       "any",
		"pool_mode":       opts.PoolMode,
		"max_client_conn": "2000",
		// Per database: the tests' databases each get their own pool.
		"default_pool_size":  "20",
		"max_db_connections": "40",
		"logfile":            filepath.Join(dir, "pgbouncer.log"),
		"pidfile":            filepath.Join(dir, "pgbouncer.pid"),
		"log_connections":    "0",
		"log_disconnections": "0",
	}
	maps.Copy(settings, opts.Extra)
	var b strings.Builder
	b.WriteString("; Written by pgcluster: a throwaway PgBouncer.\n[databases]\n* = " + upstream + "\n\n[pgbouncer]\n")
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		fmt.Fprintf(&b, "%s = %s\n", k, settings[k])
	}
	return b.String()
}

// writeOwned writes a file owned by cred (nil: us).
func writeOwned(name, content string, cred *syscall.Credential) error {
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if cred != nil {
		if err := os.Chown(name, int(cred.Uid), int(cred.Gid)); err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
	}
	return nil
}

func tail(name string, n int) string {
	b, err := os.ReadFile(name)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Addr returns the address PgBouncer listens on, "127.0.0.1:port".
func (b *Bouncer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port)) }

// Port returns the port PgBouncer listens on.
func (b *Bouncer) Port() int { return b.port }

// LogFile returns the path of PgBouncer's log.
func (b *Bouncer) LogFile() string { return filepath.Join(b.dir, "pgbouncer.log") }

// URL returns a pgx DSN for dbname through PgBouncer, with no setting of
// its own: a client that needs default_query_exec_mode (see the README's
// "Production setups") adds it.
func (b *Bouncer) URL(dbname string) string {
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Host: b.Addr(), Path: "/" + dbname,
		RawQuery: "sslmode=disable"}
	return u.String()
}

// Stop stops PgBouncer (immediate shutdown: clients are disconnected) and
// removes its directory. It is idempotent.
func (b *Bouncer) Stop() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return nil
	}
	b.stopped = true
	var errs []error
	if b.cmd != nil {
		_ = b.stdin.Close()
		select {
		case <-b.exit:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
			<-b.exit
			errs = append(errs, errors.New("pgcluster: pgbouncer did not stop within 30 s; killed"))
		}
	}
	if err := os.RemoveAll(b.dir); err != nil {
		errs = append(errs, fmt.Errorf("pgcluster: %w", err))
	}
	return errors.Join(errs...)
}
