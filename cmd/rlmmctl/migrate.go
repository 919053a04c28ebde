package main

// migrate.go: `rlmmctl migrate up | down | status | sql`. Up goes through
// remotestorage.Migrate, exactly what brokers run, so the CLI cannot drift
// from the library; down and status use the same goose provider
// (migrations.NewProvider). `sql` serves DBAs who apply schema changes with
// their own tools: it prints the Up sections plus the version bookkeeping
// that the library checks before it starts.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/spf13/cobra"

	"github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/cmd/rlmmctl/internal/ctldb"
	"github.com/krabka/remotestorage/migrations"
)

func (a *app) migrateCommand() *cobra.Command {
	cmd := groupCommand("migrate", "Apply, roll back, inspect or print the schema migrations",
		`Manage the remotestorage schema: goose migrations embedded in rlmmctl, with
the version table `+migrations.VersionTable+`.

Brokers refuse to start (remotestorage.NewPgManager fails) unless the
schema is at exactly the version their library expects; this rlmmctl
expects version `+fmt.Sprint(remotestorage.SchemaVersion)+`.`)
	cmd.AddCommand(a.migrateUpCommand(), a.migrateDownCommand(), a.migrateStatusCommand(), a.migrateSQLCommand())
	return cmd
}

func (a *app) migrateUpCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "up",
		Short: "Apply every pending migration (idempotent)",
		Long: `Apply every pending migration, through remotestorage.Migrate: the same code
brokers run. It is idempotent, and concurrent runs (several brokers, or a
broker and rlmmctl) serialise on goose's table lock (rlmm_goose_lock).

` + databaseHelp,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			src := resolveDatabase(a.databaseURL)
			pool, err := openPool(ctx, src, a.scrub, 2)
			if err != nil {
				return err
			}
			defer pool.Close()
			before, err := schemaVersion(ctx, pool)
			if err != nil {
				return err
			}
			if err := remotestorage.Migrate(ctx, pool); err != nil {
				return err
			}
			after, err := schemaVersion(ctx, pool)
			if err != nil {
				return err
			}
			if before == after {
				fmt.Fprintf(a.stdout, "%s: schema already at version %d; nothing to do\n", src, after)
			} else {
				fmt.Fprintf(a.stdout, "%s: migrated the schema from version %d to %d\n", src, before, after)
			}
			return nil
		},
	}
}

func (a *app) migrateDownCommand() *cobra.Command {
	var to int64
	var force bool
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Roll back the newest migration (or down to --to)",
		Long: `Roll back the newest applied migration, or with --to V every migration newer
than V (--to 0 removes the whole schema).

The first migration shipped is release 1's baseline (version ` + fmt.Sprint(migrations.Baseline) + `), the
whole schema in one file: rolling it back drops every table, view and
function of the schema, and with the tables the metadata of every tiered
segment (the brokers lose track of what is in remote storage). The
migrations before it are not shipped, so the schema cannot go back to one
of them. Down refuses to roll the baseline back while the tables hold rows,
unless --force.

` + databaseHelp,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if cmd.Flags().Changed("to") && to < 0 {
				return usageErrorf("--to %d: versions start at 0", to)
			}
			src := resolveDatabase(a.databaseURL)
			pool, err := openPool(ctx, src, a.scrub, 2)
			if err != nil {
				return err
			}
			defer pool.Close()
			if !force {
				target := to
				if !cmd.Flags().Changed("to") {
					current, err := schemaVersion(ctx, pool)
					if err != nil {
						return err
					}
					target = current - 1 // goose rolls back the newest applied migration
				}
				if err := rollbackLosses(ctx, pool, target); err != nil {
					return err
				}
			}
			sqlDB := stdlib.OpenDBFromPool(pool)
			defer sqlDB.Close()
			provider, err := migrations.NewProvider(sqlDB)
			if err != nil {
				return err
			}
			var results []*goose.MigrationResult
			if cmd.Flags().Changed("to") {
				results, err = provider.DownTo(ctx, to)
			} else {
				var r *goose.MigrationResult
				r, err = provider.Down(ctx)
				if r != nil {
					results = append(results, r)
				}
				if errors.Is(err, goose.ErrNoNextVersion) {
					fmt.Fprintf(a.stdout, "%s: no migration applied; nothing to roll back\n", src)
					return nil
				}
			}
			for _, r := range results {
				fmt.Fprintf(a.stdout, "rolled back %s\n", r)
			}
			if err != nil {
				return fmt.Errorf("roll back: %w", err)
			}
			if len(results) == 0 {
				fmt.Fprintf(a.stdout, "%s: nothing to roll back\n", src)
			}
			return nil
		},
	}
	cmd.Flags().Int64Var(&to, "to", 0, "roll back every migration newer than this version (0: all)")
	cmd.Flags().BoolVar(&force, "force", false, "roll back even though the tables hold metadata")
	return cmd
}

func (a *app) migrateStatusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show which migrations are applied",
		Long: `Show each embedded migration and whether it is applied, and compare the
database's schema version with the one this rlmmctl (and a broker of the
same build) expects.

` + databaseHelp,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			src := resolveDatabase(a.databaseURL)
			pool, err := openPool(ctx, src, a.scrub, 2)
			if err != nil {
				return err
			}
			defer pool.Close()
			statuses, err := migrationStatuses(ctx, pool)
			if err != nil {
				return err
			}
			version, err := schemaVersion(ctx, pool)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "database: %s\n", src)
			tw := newTable(a.stdout)
			fmt.Fprintln(tw, "VERSION\tSTATE\tAPPLIED_AT\tFILE")
			for _, s := range statuses {
				applied := "-"
				if s.State == goose.StateApplied {
					applied = s.AppliedAt.UTC().Format(time.DateTime) + " UTC"
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", s.Source.Version, s.State, applied, s.Source.Path)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			switch want := remotestorage.SchemaVersion; {
			case version == want:
				fmt.Fprintf(a.stdout, "schema version %d: up to date\n", version)
			case version < want:
				fmt.Fprintf(a.stdout, "schema version %d, this rlmmctl expects %d: run `rlmmctl migrate up`\n", version, want)
			default:
				fmt.Fprintf(a.stdout, "schema version %d is newer than this rlmmctl's %d: use a newer rlmmctl\n", version, want)
			}
			return nil
		},
	}
}

// schemaVersionSQL reads the newest applied migration. The one statement
// rlmmctl runs that sqlc does not check: goose creates the version table,
// under the name migrations.VersionTable, so it is in no migration sqlc
// reads.
var schemaVersionSQL = "SELECT coalesce(max(version_id), 0) FROM " +
	pgx.Identifier{migrations.VersionTable}.Sanitize() + " WHERE is_applied"

// schemaVersion is the newest applied migration, 0 when there is no
// version table yet (a database never migrated).
func schemaVersion(ctx context.Context, pool ctldb.DBTX) (int64, error) {
	exists, err := versionTableExists(ctx, pool)
	if err != nil || !exists {
		return 0, err
	}
	var v int64
	err = pool.QueryRow(ctx, schemaVersionSQL).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("read the schema version: %w", err)
	}
	return v, nil
}

func versionTableExists(ctx context.Context, pool ctldb.DBTX) (bool, error) {
	exists, err := queries.RelationExists(ctx, pool, pgx.Identifier{migrations.VersionTable}.Sanitize())
	if err != nil {
		return false, fmt.Errorf("look for the version table %s: %w", migrations.VersionTable, err)
	}
	return exists, nil
}

// migrationStatuses asks goose, except on a database never migrated: there
// goose's status fails on the missing version table, while the true answer
// is "everything pending".
func migrationStatuses(ctx context.Context, pool *pgxpool.Pool) ([]*goose.MigrationStatus, error) {
	sqlDB := stdlib.OpenDBFromPool(pool)
	defer sqlDB.Close()
	provider, err := migrations.NewProvider(sqlDB)
	if err != nil {
		return nil, err
	}
	exists, err := versionTableExists(ctx, pool)
	if err != nil {
		return nil, err
	}
	if !exists {
		var out []*goose.MigrationStatus
		for _, s := range provider.ListSources() {
			out = append(out, &goose.MigrationStatus{Source: s, State: goose.StatePending})
		}
		return out, nil
	}
	statuses, err := provider.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("migration status: %w", err)
	}
	return statuses, nil
}

// rollbackLosses refuses a rollback to target that would lose data (see
// the help of migrate down), saying what would be lost: one below the
// baseline drops the tables.
func rollbackLosses(ctx context.Context, pool ctldb.DBTX, target int64) error {
	if target >= migrations.Baseline {
		return nil
	}
	rows, err := metadataRowCount(ctx, pool)
	if err != nil {
		return err
	}
	if rows > 0 {
		return fmt.Errorf("rolling back to version %d undoes migration %d, release 1's baseline, which drops the remotestorage tables and their %d rows: the metadata of every tiered segment. Pass --force if that is what you want", target, migrations.Baseline, rows)
	}
	return nil
}

// metadataRowCount counts the rows of the remotestorage tables that exist.
func metadataRowCount(ctx context.Context, pool ctldb.DBTX) (int64, error) {
	var total int64
	for _, table := range []struct {
		name  string
		count func(context.Context, ctldb.DBTX) (int64, error)
	}{
		{"rlmm_partitions", queries.PartitionRowCount},
		{"rlmm_segments", queries.SegmentRowCount},
	} {
		exists, err := queries.RelationExists(ctx, pool, table.name)
		if err != nil {
			return 0, fmt.Errorf("look for table %s: %w", table.name, err)
		}
		if !exists {
			continue
		}
		n, err := table.count(ctx, pool)
		if err != nil {
			return 0, fmt.Errorf("count the rows of %s: %w", table.name, err)
		}
		total += n
	}
	return total, nil
}

func (a *app) migrateSQLCommand() *cobra.Command {
	var after int64
	var noVersionTable bool
	cmd := &cobra.Command{
		Use:   "sql",
		Short: "Print the migrations' SQL for DBAs who apply schema changes themselves",
		Long: `Print the SQL of the embedded migrations (their Up sections, in version
order), for DBAs who apply schema changes with their own tools. No database
is needed.

Each migration is wrapped in a transaction (unless it is marked
"NO TRANSACTION") that also records its version in the version table
` + migrations.VersionTable + `, as goose would: brokers check that version
before they start, and a later "rlmmctl migrate up" then knows what is
applied. --no-version-table leaves that bookkeeping out.

Apply it with, e.g.:
  rlmmctl migrate sql > schema.sql
  psql -v ON_ERROR_STOP=1 -f schema.sql "$DATABASE_URL"
For an upgrade, print only what "rlmmctl migrate status" shows as pending:
  rlmmctl migrate sql --after ` + fmt.Sprint(migrations.Baseline) + "`",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if after < 0 {
				return usageErrorf("--after %d: versions start at 0", after)
			}
			return writeMigrationSQL(a.stdout, migrations.FS(), after, !noVersionTable)
		},
	}
	cmd.Flags().Int64Var(&after, "after", 0, "print only the migrations newer than this version")
	cmd.Flags().BoolVar(&noVersionTable, "no-version-table", false, "leave out the "+migrations.VersionTable+" statements")
	return cmd
}

// gooseAnnotationRe matches a goose annotation line: "-- +goose Up".
var gooseAnnotationRe = regexp.MustCompile(`^\s*--\s*\+goose\s+(.*?)\s*$`)

// migrationFileRe matches a goose SQL migration file name: its version first.
var migrationFileRe = regexp.MustCompile(`^(\d+)_.*\.sql$`)

// upSection is the Up part of one migration file.
type upSection struct {
	version       int64
	file          string
	sql           string
	noTransaction bool
}

// parseUpSection extracts the Up section of a goose SQL file, dropping the
// annotation lines.
func parseUpSection(file string, content string) (upSection, error) {
	s := upSection{file: file}
	m := migrationFileRe.FindStringSubmatch(file)
	if m == nil {
		return s, fmt.Errorf("migration %s: the name does not start with a version", file)
	}
	// Decimal, leading zeros and all: fmt.Sscan would read "00011" as octal.
	version, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return s, fmt.Errorf("migration %s: version: %w", file, err)
	}
	s.version = version
	var body strings.Builder
	inUp := false
	for _, line := range strings.SplitAfter(content, "\n") {
		ann := gooseAnnotationRe.FindStringSubmatch(line)
		if ann == nil {
			if inUp {
				body.WriteString(line)
			}
			continue
		}
		switch strings.ToUpper(ann[1]) {
		case "UP":
			inUp = true
		case "DOWN":
			inUp = false
		case "STATEMENTBEGIN", "STATEMENTEND":
		case "NO TRANSACTION":
			s.noTransaction = true
		default:
			// ENVSUB and whatever goose adds later change what runs; refuse
			// rather than print SQL that differs from what goose applies.
			return s, fmt.Errorf("migration %s: annotation %q is not supported by `rlmmctl migrate sql`", file, ann[1])
		}
	}
	s.sql = strings.TrimSpace(body.String())
	if s.sql == "" {
		return s, fmt.Errorf("migration %s: no Up section", file)
	}
	return s, nil
}

// writeMigrationSQL prints the Up sections newer than after, in order.
func writeMigrationSQL(w io.Writer, fsys fs.FS, after int64, versionTable bool) error {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return err
	}
	var sections []upSection
	for _, name := range names {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		s, err := parseUpSection(name, string(b))
		if err != nil {
			return err
		}
		if s.version > after {
			sections = append(sections, s)
		}
	}
	slices.SortFunc(sections, func(x, y upSection) int { return int(x.version - y.version) })

	table := migrations.VersionTable // a plain identifier: no quotes needed
	var b strings.Builder
	fmt.Fprintf(&b, "-- The remotestorage schema: the Up sections of the embedded goose migrations,\n")
	switch n := len(sections); n {
	case 0:
		fmt.Fprintf(&b, "-- printed by `rlmmctl migrate sql`. Nothing newer than version %d.\n", after)
	case 1:
		fmt.Fprintf(&b, "-- version %d, printed by `rlmmctl migrate sql`.\n", sections[0].version)
	default:
		fmt.Fprintf(&b, "-- versions %d to %d, printed by `rlmmctl migrate sql`.\n", sections[0].version, sections[n-1].version)
	}
	if versionTable && len(sections) > 0 {
		// Goose's own version table for PostgreSQL, and its version-0 row
		// (goose writes it when it creates the table).
		fmt.Fprintf(&b, "\n-- Goose's version table, as goose itself creates it.\n")
		fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s (\n"+
			"    id integer PRIMARY KEY GENERATED BY DEFAULT AS IDENTITY,\n"+
			"    version_id bigint NOT NULL,\n"+
			"    is_applied boolean NOT NULL,\n"+
			"    tstamp timestamp NOT NULL DEFAULT now()\n);\n", table)
		fmt.Fprintf(&b, "INSERT INTO %s (version_id, is_applied)\n"+
			"    SELECT 0, true WHERE NOT EXISTS (SELECT 1 FROM %s);\n", table, table)
	}
	for _, s := range sections {
		fmt.Fprintf(&b, "\n-- Version %d: %s\n", s.version, s.file)
		if !s.noTransaction {
			b.WriteString("BEGIN;\n\n")
		}
		b.WriteString(s.sql)
		b.WriteString("\n")
		if versionTable {
			fmt.Fprintf(&b, "\nINSERT INTO %s (version_id, is_applied) VALUES (%d, true);\n", table, s.version)
		}
		if !s.noTransaction {
			b.WriteString("\nCOMMIT;\n")
		}
	}
	_, err = io.WriteString(w, b.String())
	return err
}
