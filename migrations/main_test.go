package migrations_test

import (
	"testing"

	"github.com/krabka/remotestorage/internal/pgtest"
)

// TestMain is the one entry point of the package's tests. pgtest starts
// the PostgreSQL server the tests share on first use (unless DATABASE_URL
// names one), and pgtest.Main stops it, and PgBouncer, once they are done.
func TestMain(m *testing.M) { pgtest.Main(m) }
