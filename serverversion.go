package remotestorage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The PostgreSQL versions the schema works on (docs/OPERATIONS.md's table
// of supported versions says what was tested on each).
const (
	// MinServerVersion is the oldest PostgreSQL major version on which the
	// schema works: the migrations use the xid8 type, new in 13.
	// NewPgManager and Migrate refuse an older server with
	// ErrServerVersion.
	MinServerVersion = 13
	// OldestTestedServerVersion is the oldest PostgreSQL major version the
	// project's tests run on. On an older server that the schema still
	// works on, NewPgManager and Migrate log one warning and go on.
	OldestTestedServerVersion = 15
)

// ErrServerVersion: NewPgManager or Migrate was given a PostgreSQL server
// older than [MinServerVersion], on which the schema cannot work. Nothing
// was changed.
var ErrServerVersion = errors.New("remotestorage: PostgreSQL server too old")

// checkServerVersion refuses a server older than MinServerVersion, and logs
// one warning (through WithLogger's logger, else slog's default) for one
// older than OldestTestedServerVersion.
func checkServerVersion(ctx context.Context, pool *pgxpool.Pool, opts ...Option) error {
	var num int
	var text string
	err := pool.QueryRow(ctx, "SELECT current_setting('server_version_num')::int, current_setting('server_version')").Scan(&num, &text)
	if err != nil {
		return ioError(ctx, err, "read the server's version")
	}
	major := num / 10000
	switch {
	case major < MinServerVersion:
		return fmt.Errorf("%w: the server runs PostgreSQL %s; the schema needs PostgreSQL %d or newer (tested on %d and newer)",
			ErrServerVersion, text, MinServerVersion, OldestTestedServerVersion)
	case major < OldestTestedServerVersion:
		logger := newOptions(opts).logger
		if logger == nil {
			logger = slog.Default()
		}
		logger.LogAttrs(ctx, slog.LevelWarn,
			fmt.Sprintf("remotestorage: the server runs PostgreSQL %s, older than %d, the oldest version tested; the schema works on it, but nothing vouches for the rest",
				text, OldestTestedServerVersion),
			slog.String("server_version", text), slog.Int("oldest_tested", OldestTestedServerVersion))
	}
	return nil
}
