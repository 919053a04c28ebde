package pgtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/krabka/remotestorage/internal/pgcluster"
)

// BouncerDSNSettings are the DSN settings a pgx client needs through
// PgBouncer in transaction pooling mode before 1.21 (Debian 12 ships 1.18):
// no named prepared statements, which live on one server connection while
// the next transaction may run on another. See the README.
const BouncerDSNSettings = "default_query_exec_mode=exec"

// bouncer is the one PgBouncer of this test binary, in front of its server.
var bouncer struct {
	once sync.Once
	b    *pgcluster.Bouncer
	err  error
}

// Bouncer returns this test binary's PgBouncer (pool_mode=transaction, from
// Debian's pgbouncer package) in front of the test server, starting both on
// first use; [Main] stops it. The test fails, with how to install it, when
// pgbouncer is missing: it is never skipped.
func Bouncer(t testing.TB) *pgcluster.Bouncer {
	t.Helper()
	ensureServer(t)
	bouncer.once.Do(func() {
		bouncer.b, bouncer.err = startBouncer()
	})
	if bouncer.err != nil {
		t.Fatal(bouncer.err)
	}
	return bouncer.b
}

func startBouncer() (*pgcluster.Bouncer, error) {
	cfg, err := pgx.ParseConfig(server.info.AdminURL)
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := pgcluster.StartBouncer(ctx, pgcluster.BouncerOptions{
		Host: cfg.Host, Port: int(cfg.Port), User: cfg.User, Password: cfg.Password,
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

func stopBouncer() error {
	if bouncer.b == nil {
		return nil
	}
	err := bouncer.b.Stop()
	bouncer.b = nil
	return err
}

// NewBouncerDatabase creates a migrated database ([NewDatabase]) and
// returns two DSNs for it: through this binary's PgBouncer (transaction
// pooling, with BouncerDSNSettings) and straight to the server (for a
// session connection, such as the cache's listener).
func NewBouncerDatabase(t testing.TB) (pooled, direct string) {
	t.Helper()
	b := Bouncer(t)
	direct = NewDatabase(t)
	cfg, err := pgx.ParseConfig(direct)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return b.URL(cfg.Database) + "&" + BouncerDSNSettings, direct
}

// NewBouncerPool returns a pool through PgBouncer on a new migrated
// database, closed at cleanup, and the direct DSN of that database.
func NewBouncerPool(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	pooled, direct := NewBouncerDatabase(t)
	pool, err := pgxpool.New(context.Background(), pooled)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool, direct
}
