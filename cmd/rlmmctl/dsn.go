package main

// dsn.go: where the database comes from, and keeping its password out of
// everything rlmmctl prints. Operators paste rlmmctl's output into tickets
// and chats, so a password must never reach stdout or stderr: DSNs are
// redacted before they are echoed, and, as a second line of defence, every
// byte written goes through a scrubber that knows the passwords in play.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/krabka/remotestorage/cmd/rlmmctl/internal/ctldb"
)

// queries are rlmmctl's own statements, type-checked against the schema
// by sqlc (queries/ generated into internal/ctldb). Everything a broker
// does goes through the library instead.
var queries = ctldb.New()

// redactedPassword replaces passwords in echoed DSNs.
const redactedPassword = "xxxxx"

// dbSource is the database rlmmctl was pointed at.
type dbSource struct {
	dsn  string // "" means libpq's PG* variables, read by pgx's ParseConfig("")
	from string // for messages: where dsn came from
}

// resolveDatabase applies the precedence --database-url, DATABASE_URL,
// then the PG* variables.
func resolveDatabase(flagValue string) dbSource {
	if flagValue != "" {
		return dbSource{dsn: flagValue, from: "--database-url"}
	}
	if v := os.Getenv("DATABASE_URL"); v != "" {
		return dbSource{dsn: v, from: "DATABASE_URL"}
	}
	return dbSource{from: "the PG* environment variables (PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE, …)"}
}

// configured reports whether the user named a database at all; the demo
// starts its own throwaway cluster when not.
func (s dbSource) configured() bool {
	return s.dsn != "" || os.Getenv("PGHOST") != ""
}

// String is the redacted DSN and its origin, safe to print.
func (s dbSource) String() string {
	if s.dsn == "" {
		return s.from
	}
	return redactDSN(s.dsn, redactedPassword) + " (from " + s.from + ")"
}

// connectTimeout bounds connecting when the DSN sets no connect_timeout, so
// that a wrong host fails in seconds rather than hanging an operator's shell.
const connectTimeout = 10 * time.Second

// openPool connects to src and checks that the server answers. Errors name
// the target by host, port, user and database, never by the full DSN.
func openPool(ctx context.Context, src dbSource, scrub *scrubber, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(src.dsn)
	if err != nil {
		return nil, fmt.Errorf("the database from %s: %s", src.from, parseErrorWithoutDSN(err))
	}
	// The password may also come from PGPASSWORD or ~/.pgpass: learn it
	// whatever its origin.
	scrub.add(cfg.ConnConfig.Password)
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = connectTimeout
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s (from %s): %w", describeTarget(cfg), src.from, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to %s (from %s): %w", describeTarget(cfg), src.from, err)
	}
	return pool, nil
}

// parseErrorWithoutDSN is what pgconn says of a DSN it cannot parse, without
// the DSN: pgconn quotes it, masking only the password spellings it knows
// (not "password = x", nor a quoted one with a space, nor sslpassword with
// spaces). The scrubber stays the second line of defence.
func parseErrorWithoutDSN(err error) string {
	var pce *pgconn.ParseConfigError
	if !errors.As(err, &pce) {
		return err.Error()
	}
	hidden := *pce
	hidden.ConnString = ""
	return "cannot parse the DSN (not shown: it may hold a password): " + strings.TrimPrefix(hidden.Error(), "cannot parse ``: ")
}

// describeTarget names a database without its password.
func describeTarget(cfg *pgxpool.Config) string {
	c := cfg.ConnConfig
	return fmt.Sprintf("host=%s port=%d user=%s database=%s", c.Host, c.Port, c.User, c.Database)
}

// kvPasswordRe matches password=… (or the TLS key's sslpassword=…) in a
// keyword/value DSN, quoted or not, with or without spaces around '='.
var kvPasswordRe = regexp.MustCompile(`(?i)\b((?:ssl)?password)\s*=\s*('(?:[^'\\]|\\.)*'|\S*)`)

// kvPasswordRemoveRe is kvPasswordRe with the whitespace before it.
var kvPasswordRemoveRe = regexp.MustCompile(`(?i)\s*\b(?:ssl)?password\s*=\s*('(?:[^'\\]|\\.)*'|\S*)`)

// urlPasswordParamRe matches a password (or sslpassword) query parameter
// of a URL DSN.
var urlPasswordParamRe = regexp.MustCompile(`(?i)([?&])((?:ssl)?password)=([^&#]*)`)

// isURLDSN reports whether dsn is in URL form rather than keyword/value form.
func isURLDSN(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// urlPasswordSpan returns where the userinfo password of a URL DSN is:
// dsn[start:end], and ok false when there is none. It works on strings that
// net/url cannot parse (multi-host URLs, raw special characters), because a
// DSN that fails to parse is exactly the one that ends up in an error.
func urlPasswordSpan(dsn string) (start, end int, ok bool) {
	i := strings.Index(dsn, "://")
	if i < 0 {
		return 0, 0, false
	}
	authStart := i + len("://")
	rest := dsn[authStart:]
	// The userinfo ends at the last "@" before the query. Searching up to
	// the query rather than the path tolerates a raw "/" in a password, and
	// taking the last "@" a raw "@". No "@" there may mean a raw "?" or "#"
	// in the password: then take the last "@" of all.
	limit := len(rest)
	if q := strings.IndexAny(rest, "?#"); q >= 0 {
		limit = q
	}
	at := strings.LastIndex(rest[:limit], "@")
	if at < 0 {
		at = strings.LastIndex(rest, "@")
	}
	if at < 0 {
		return 0, 0, false
	}
	colon := strings.Index(rest[:at], ":")
	if colon < 0 {
		return 0, 0, false
	}
	return authStart + colon + 1, authStart + at, true
}

// redactDSN returns dsn with its password replaced by replacement, or
// removed when replacement is "" (which leaves a DSN psql can use: it asks
// for the password).
func redactDSN(dsn, replacement string) string {
	if !isURLDSN(dsn) {
		if replacement == "" {
			return strings.TrimSpace(kvPasswordRemoveRe.ReplaceAllString(dsn, ""))
		}
		return kvPasswordRe.ReplaceAllString(dsn, "${1}="+replacement)
	}
	if start, end, ok := urlPasswordSpan(dsn); ok {
		if replacement == "" {
			dsn = dsn[:start-1] + dsn[end:] // drop the ":" too
		} else {
			dsn = dsn[:start] + replacement + dsn[end:]
		}
	}
	if replacement != "" {
		return urlPasswordParamRe.ReplaceAllString(dsn, "${1}${2}="+replacement)
	}
	dsn = urlPasswordParamRe.ReplaceAllString(dsn, "$1")
	// Tidy what removing a parameter leaves: "?&", "&&", a trailing "?" or "&".
	dsn = strings.NewReplacer("?&", "?", "&&", "&").Replace(dsn)
	return strings.TrimRight(dsn, "?&")
}

// passwordsIn returns the passwords written in dsn, raw and URL-decoded.
func passwordsIn(dsn string) []string {
	var raw []string
	if isURLDSN(dsn) {
		if start, end, ok := urlPasswordSpan(dsn); ok {
			raw = append(raw, dsn[start:end])
		}
		for _, m := range urlPasswordParamRe.FindAllStringSubmatch(dsn, -1) {
			raw = append(raw, m[3])
		}
	} else {
		for _, m := range kvPasswordRe.FindAllStringSubmatch(dsn, -1) {
			p := m[2]
			if len(p) >= 2 && p[0] == '\'' {
				p = strings.NewReplacer(`\'`, `'`, `\\`, `\`).Replace(p[1 : len(p)-1])
			}
			raw = append(raw, p)
		}
	}
	var out []string
	for _, p := range raw {
		out = append(out, p)
		if d, err := url.PathUnescape(p); err == nil && d != p {
			out = append(out, d)
		}
		if d, err := url.QueryUnescape(p); err == nil && d != p {
			out = append(out, d)
		}
	}
	return out
}

// minSecretLen is the shortest password the scrubber replaces in output:
// replacing every "a" of a report because the password is "a" would mangle
// it, and a password that short protects nothing anyway.
const minSecretLen = 4

// scrubber replaces known passwords in everything rlmmctl writes.
type scrubber struct {
	mu       sync.Mutex
	secrets  map[string]bool
	replacer *strings.Replacer
}

func newScrubber() *scrubber {
	s := &scrubber{secrets: map[string]bool{}}
	s.add(os.Getenv("PGPASSWORD"))
	s.addDSN(os.Getenv("DATABASE_URL"))
	return s
}

// addDSN learns the passwords written in dsn.
func (s *scrubber) addDSN(dsn string) {
	for _, p := range passwordsIn(dsn) {
		s.add(p)
	}
}

// add learns one password.
func (s *scrubber) add(secret string) {
	if len(secret) < minSecretLen {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.secrets[secret] {
		return
	}
	s.secrets[secret] = true
	// Longest first, so that a password containing another one is
	// replaced whole.
	secrets := slices.SortedFunc(maps.Keys(s.secrets), func(a, b string) int { return len(b) - len(a) })
	var pairs []string
	for _, sec := range secrets {
		pairs = append(pairs, sec, redactedPassword)
	}
	s.replacer = strings.NewReplacer(pairs...)
}

// scrub returns text with every known password replaced.
func (s *scrubber) scrub(text string) string {
	s.mu.Lock()
	r := s.replacer
	s.mu.Unlock()
	if r == nil {
		return text
	}
	return r.Replace(text)
}

// writer wraps w so that everything written to it is scrubbed. rlmmctl
// writes whole lines or whole messages per call, so a password is never
// split across two writes.
func (s *scrubber) writer(w io.Writer) io.Writer {
	return scrubWriter{s: s, w: w}
}

type scrubWriter struct {
	s *scrubber
	w io.Writer
}

func (sw scrubWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(sw.w, sw.s.scrub(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
