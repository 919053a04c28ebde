package remotestorage

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/multitracer"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/krabka/remotestorage/internal/backoff"
)

// Defaults of ConfigurePool.
const (
	// DefaultConnectBackoffMin is the pause after the first failed connection
	// attempt; it doubles with each further failure.
	DefaultConnectBackoffMin = 50 * time.Millisecond
	// DefaultConnectBackoffMax caps the pause, and so bounds how long after
	// the database comes back the pool notices.
	DefaultConnectBackoffMax = time.Second
	// DefaultConnectTimeout bounds one connection attempt when the DSN sets
	// no connect_timeout (pgxpool's own default is two minutes).
	DefaultConnectTimeout = 5 * time.Second
	// DefaultCancelDeadlineDelay is how long a statement whose context ended
	// waits for the server to acknowledge the cancel request before its
	// connection is closed.
	DefaultCancelDeadlineDelay = time.Second
)

// NewPool parses dsn, applies ConfigurePool and returns the pool. Like
// pgxpool.New it does not connect: a broker that starts while the database
// is down gets ErrIO from its calls until the database answers.
func NewPool(ctx context.Context, dsn string, opts ...PoolOption) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, dsnError(dsn, err)
	}
	ConfigurePool(cfg, opts...)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("remotestorage: %w", err)
	}
	return pool, nil
}

// dsnError is the error of a DSN that does not parse, naming what is wrong
// but not the DSN. pgconn's error quotes the DSN and masks only the password
// spellings it recognises: "password = secret" (libpq allows spaces around
// the '='), a quoted password with a space, an upper-case keyword or a tab
// before the next keyword all kept the password in the message. Here the
// DSN is never quoted, and what pgconn says about it (a value it could not
// parse) is scrubbed of every password the DSN seems to hold.
func dsnError(dsn string, err error) error {
	detail := err.Error()
	var pce *pgconn.ParseConfigError
	if errors.As(err, &pce) {
		hidden := *pce
		hidden.ConnString = ""
		detail = strings.TrimPrefix(hidden.Error(), "cannot parse ``: ")
	}
	for _, pw := range dsnPasswords(dsn) {
		detail = strings.ReplaceAll(detail, pw, "xxxxx")
	}
	return fmt.Errorf("remotestorage: cannot parse the DSN (not shown: it may hold a password): %s", detail)
}

// dsnPasswordRes match the passwords of a DSN that may not parse: a
// keyword/value password (or sslpassword) with or without spaces around
// '=', quoted or not; a URL's userinfo password; a URL's password query
// parameter, its key spelled with spaces or percent-encoded.
var dsnPasswordRes = []*regexp.Regexp{
	regexp.MustCompile(`(?i)password\s*=\s*'((?:[^'\\]|\\.)*)'?`),
	regexp.MustCompile(`(?i)password\s*=\s*([^\s'&#][^\s&#]*)`),
	regexp.MustCompile(`(?i)password(?:%20|\+)*=([^&#]*)`),
	regexp.MustCompile(`^postgres(?:ql)?://[^:/?#@]*:(.*)@`),
	regexp.MustCompile(`^postgres(?:ql)?://[^:/?#@]*:([^@/?#]*)`),
}

// minScrubbedPassword is the shortest password scrubbed from an error's
// text: replacing every "a" of a message because the password is "a" would
// mangle it, and the DSN itself is never in the message anyway.
const minScrubbedPassword = 4

// dsnPasswords returns what may be passwords in dsn, raw and decoded,
// longest first.
func dsnPasswords(dsn string) []string {
	var out []string
	add := func(p string) {
		if len(p) >= minScrubbedPassword {
			out = append(out, p)
		}
	}
	for _, re := range dsnPasswordRes {
		for _, m := range re.FindAllStringSubmatch(dsn, -1) {
			add(m[1])
			add(strings.NewReplacer(`\'`, `'`, `\\`, `\`).Replace(m[1]))
			if d, err := url.PathUnescape(m[1]); err == nil {
				add(d)
			}
			if d, err := url.QueryUnescape(m[1]); err == nil {
				add(d)
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// ConfigurePool prepares a pool configuration for a database that restarts,
// crashes and drops connections. It keeps what the caller set (its
// BeforeConnect runs after the backoff's, its AfterConnect before the one
// that marks a connection for its warm-up, its Tracer beside the
// backoff's) except the context watcher handler, which it replaces, and
// adds:
//
//   - A connect backoff. pgxpool opens a new connection for every Acquire
//     that finds none idle, so while the database is down each call of each
//     caller dials it (about 900 attempts in 5 s from four callers retrying
//     every 20 ms, measured). After a failed attempt the pool makes no other
//     for a pause (WithConnectBackoff; 50 ms doubling to 1 s by default, with
//     jitter), then lets exactly one attempt probe the server; the calls in
//     between fail at once with an error matching ErrIO for which
//     OutcomeUnknown is false. The first successful connection ends the
//     backoff.
//   - A connect timeout (DefaultConnectTimeout) when the DSN sets none.
//   - A warm-up of each new connection once it has served the manager's
//     first call on it (statement.go's release; its AfterConnect, after the
//     caller's, marks it): the manager's add, finish and queries, run once
//     in a transaction rolled back, in the background, before the
//     connection goes back to the pool, so that the calls it serves next
//     do not pay for preparing, planning and catalog loading (about five
//     warm writes' worth, measured). The first call pays only for what it
//     needs, as on a plain pool; only a call that needs that very
//     connection (the pool at its size) waits for the warm-up. A
//     connection to a database not migrated yet is not warmed.
//   - Cancel requests: when a caller's context ends during a statement, pgx
//     asks the server to cancel it (and closes the connection if the server
//     does not answer within DefaultCancelDeadlineDelay) instead of only
//     closing the socket, which leaves the statement running, and possibly
//     committing, on the server, for example behind a row lock.
func ConfigurePool(cfg *pgxpool.Config, opts ...PoolOption) {
	o := poolOptions{backoffMin: DefaultConnectBackoffMin, backoffMax: DefaultConnectBackoffMax}
	for _, opt := range opts {
		opt(&o)
	}
	cc := cfg.ConnConfig
	if cc.ConnectTimeout <= 0 {
		cc.ConnectTimeout = DefaultConnectTimeout
	}
	b := &connectBackoff{delay: backoff.Backoff{Min: o.backoffMin, Max: max(o.backoffMin, o.backoffMax)}, connectTimeout: cc.ConnectTimeout}
	if cc.Tracer == nil {
		cc.Tracer = b
	} else {
		cc.Tracer = multitracer.New(cc.Tracer, b)
	}
	cc.BuildContextWatcherHandler = func(pgConn *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: pgConn, DeadlineDelay: DefaultCancelDeadlineDelay}
	}

	after := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		if after != nil {
			if err := after(ctx, conn); err != nil {
				return err
			}
		}
		conn.PgConn().CustomData()[warmUpKey] = true // warmed after its first call (release)
		return nil
	}

	before := cfg.BeforeConnect
	cfg.BeforeConnect = func(ctx context.Context, cc *pgx.ConnConfig) error {
		if err := b.admit(); err != nil {
			return err
		}
		if before != nil {
			return before(ctx, cc)
		}
		return nil
	}
}

// connectBackoff is a circuit breaker on connection attempts: closed while
// they succeed; after a failure, open for a pause, then half-open for one
// probe.
type connectBackoff struct {
	connectTimeout time.Duration

	mu         sync.Mutex
	delay      backoff.Backoff // its failures count the consecutive failed attempts; 0: closed
	retryAt    time.Time       // no attempt before this
	probeSince time.Time       // a probe is running since then; zero: none
}

// errConnectBackoff refuses a connection attempt during the backoff.
type errConnectBackoff struct {
	failures int
	wait     time.Duration
}

func (e *errConnectBackoff) Error() string {
	return fmt.Sprintf("not connecting: the last %d connection attempts failed; next attempt in %v", e.failures, e.wait.Round(time.Millisecond))
}

// SafeToRetry tells pgconn.SafeToRetry, and so OutcomeUnknown, that nothing
// was sent.
func (e *errConnectBackoff) SafeToRetry() bool { return true }

// admit lets an attempt through, or refuses it during the backoff.
func (b *connectBackoff) admit() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.delay.Failures() == 0 {
		return nil
	}
	now := time.Now()
	// A probe that never reported back (a connect that failed before pgx
	// traced it) stops blocking others after a connect timeout's worth.
	probing := !b.probeSince.IsZero() && now.Sub(b.probeSince) < b.connectTimeout+b.delay.Max
	if probing || now.Before(b.retryAt) {
		return &errConnectBackoff{failures: b.delay.Failures(), wait: max(0, b.retryAt.Sub(now))}
	}
	b.probeSince = now
	return nil
}

// done records the outcome of an attempt.
func (b *connectBackoff) done(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probeSince = time.Time{}
	if err == nil {
		b.delay.Reset()
		return
	}
	if errors.Is(err, context.Canceled) {
		return // the caller gave up: says nothing about the server
	}
	b.retryAt = time.Now().Add(b.delay.Next())
}

func (b *connectBackoff) TraceConnectStart(ctx context.Context, _ pgx.TraceConnectStartData) context.Context {
	return ctx
}

func (b *connectBackoff) TraceConnectEnd(_ context.Context, data pgx.TraceConnectEndData) {
	b.done(data.Err)
}

// TraceQueryStart and TraceQueryEnd make connectBackoff a pgx.QueryTracer,
// the type of ConnConfig.Tracer; it only watches connects.
func (b *connectBackoff) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (b *connectBackoff) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// closesOnCancel reports whether pool's connections are closed when a
// context interrupts their statement: pgx's default context watcher does
// that, where ConfigurePool's sends a cancel request and keeps the
// connection. A handler the caller wrote is given the benefit of the doubt.
func closesOnCancel(pool *pgxpool.Pool) (closes bool) {
	build := pool.Config().ConnConfig.BuildContextWatcherHandler
	if build == nil {
		return true // pgconn falls back to its deadline handler
	}
	defer func() {
		if recover() != nil {
			closes = false // a handler of the caller's that needs a live connection
		}
	}()
	_, deadline := build(&pgconn.PgConn{}).(*pgconn.DeadlineContextWatcherHandler)
	return deadline
}
