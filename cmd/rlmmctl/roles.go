package main

// roles.go: "rlmmctl roles sql" prints the SQL that sets up least-privilege
// roles. It is SQL for a DBA to run, not a migration: roles belong to the
// whole cluster, creating them needs CREATEROLE, which the role that
// migrates should not have, and a DBA wants to read what is granted.

import (
	"io"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/krabka/remotestorage/migrations"
)

// identifierRe is what --prefix and --schema accept: plain lower-case SQL
// identifiers, so that the printed names need no quoting to be read.
var identifierRe = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,39}$`)

func (a *app) rolesCommand() *cobra.Command {
	cmd := groupCommand("roles", "Print the SQL of the least-privilege roles",
		`Least-privilege roles for the remotestorage schema: an owner role that owns
the tables and runs the migrations, an application role with only the DML
brokers need, a read-only role for dashboards, and a role for people (DBAs)
who read everything and repair through the repair functions.`)
	cmd.AddCommand(a.rolesSQLCommand())
	return cmd
}

func (a *app) rolesSQLCommand() *cobra.Command {
	var prefix, schema string
	cmd := &cobra.Command{
		Use:   "sql",
		Short: "Print the SQL that creates the owner, application, read-only and DBA roles",
		Long: `Print SQL that creates four group roles (NOLOGIN) and grants them what they
need on the remotestorage tables of one schema. No database is needed.

  <prefix>owner     owns the tables and runs the migrations: CREATE on the
                    schema; tables it creates are granted to the others by
                    default privileges.
  <prefix>app       what brokers (PgManager) log in as: SELECT on every table
                    and view; INSERT and UPDATE on rlmm_partitions,
                    rlmm_segments and rlmm_segment_epochs;
                    EXECUTE on rlmm_purge_round, through which PgManager
                    purges (in the background, and when "rlmmctl purge"
                    runs the same code). No DELETE or TRUNCATE (the library
                    deletes rows only through rlmm_purge_round), no ALTER or
                    DROP; of sequences, USAGE on rlmm_versions (the
                    write order) alone. Enough for remotestorage.Migrate
                    at a broker's start: on a schema that is up to date it
                    only reads.
  <prefix>readonly  SELECT on the tables and views, for dashboards.
  <prefix>dba       what people log in as: everything readonly has, and
                    EXECUTE on the repair functions (rlmm_set_segment_state,
                    rlmm_set_partition_delete_state, rlmm_resync,
                    rlmm_purge; see docs/DBA.md), which run as the owner. No INSERT,
                    UPDATE, DELETE or TRUNCATE of its own.

Run the SQL as a superuser in the database of the remotestorage tables,
before the first migration and again after each one: it is idempotent, hands
tables, views and functions created by other roles to the owner, and
narrows the application role to the writes listed above (default
privileges give it write access to every new table, so that brokers work
right after a migration). Then create login roles as
members, for example:

  CREATE ROLE rlmm_migrator LOGIN PASSWORD '…' IN ROLE rlmm_owner;
  ALTER ROLE rlmm_migrator SET role = 'rlmm_owner';  -- tables owned by rlmm_owner
  CREATE ROLE broker1 LOGIN PASSWORD '…' IN ROLE rlmm_app;
  CREATE ROLE grafana LOGIN PASSWORD '…' IN ROLE rlmm_readonly;
  CREATE ROLE alice LOGIN PASSWORD '…' IN ROLE rlmm_dba;

  rlmmctl roles sql > roles.sql
  psql -v ON_ERROR_STOP=1 -f roles.sql "$DATABASE_URL"`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !identifierRe.MatchString(prefix) {
				return usageErrorf("--prefix %q: use lower-case letters, digits and _, starting with a letter or _", prefix)
			}
			if !identifierRe.MatchString(schema) {
				return usageErrorf("--schema %q: use lower-case letters, digits and _, starting with a letter or _", schema)
			}
			return writeRolesSQL(a.stdout, prefix, schema)
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "rlmm_", "prefix of the role names")
	cmd.Flags().StringVar(&schema, "schema", "public", "schema of the remotestorage tables")
	return cmd
}

// writeRolesSQL writes the roles script. The names are validated
// identifiers; they are quoted anyway.
func writeRolesSQL(w io.Writer, prefix, schema string) error {
	q := func(name string) string { return pgx.Identifier{name}.Sanitize() }
	lit := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	owner, app, readonly, dba := prefix+"owner", prefix+"app", prefix+"readonly", prefix+"dba"
	r := strings.NewReplacer(
		"{owner}", q(owner), "{app}", q(app), "{readonly}", q(readonly), "{dba}", q(dba), "{schema}", q(schema),
		"{owner_lit}", lit(owner), "{app_lit}", lit(app), "{readonly_lit}", lit(readonly), "{dba_lit}", lit(dba), "{schema_lit}", lit(schema),
		"{version_table_lit}", lit(migrations.VersionTable),
	)
	_, err := io.WriteString(w, r.Replace(rolesSQL))
	return err
}

const rolesSQL = `-- Least-privilege roles for remotestorage (printed by rlmmctl roles sql).
-- Idempotent. Run as a superuser in the database of the remotestorage tables.
BEGIN;

DO $roles$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = {owner_lit}) THEN
        CREATE ROLE {owner} NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = {app_lit}) THEN
        CREATE ROLE {app} NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = {readonly_lit}) THEN
        CREATE ROLE {readonly} NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = {dba_lit}) THEN
        CREATE ROLE {dba} NOLOGIN;
    END IF;
END
$roles$;

-- People read what dashboards read, and repair through the functions.
GRANT {readonly} TO {dba};

-- The owner creates the tables (goose, rlmmctl migrate up); the others
-- only use them.
GRANT USAGE, CREATE ON SCHEMA {schema} TO {owner};
GRANT USAGE ON SCHEMA {schema} TO {app}, {readonly};

-- Whatever the owner creates from now on (the tables of new migrations).
ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA {schema}
    GRANT SELECT, INSERT, UPDATE ON TABLES TO {app};
ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA {schema}
    GRANT SELECT ON TABLES TO {readonly};
-- Brokers use one sequence, rlmm_versions (the write order), granted
-- below; none of a later migration unless it grants it, and not that of
-- goose's version table (the migrating role's).
ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA {schema}
    REVOKE ALL ON SEQUENCES FROM {app};
ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA {schema}
    GRANT SELECT ON SEQUENCES TO {readonly};

-- What exists already: owned by the owner role, readable by the others.
-- Brokers insert into and update only the four data tables, and delete
-- nothing themselves: purging (PurgeForgotten) deletes through
-- rlmm_purge_round, which runs as the owner. The version table, the data's
-- generation (bumped by rlmm_resync) and the lookup tables of the state
-- machines stay read-only for them.
DO $existing$
DECLARE
    t record;
BEGIN
    FOR t IN
        SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = {schema_lit} AND c.relkind IN ('r', 'p', 'v') AND c.relname LIKE 'rlmm\_%'
    LOOP
        EXECUTE format('ALTER %s %I.%I OWNER TO %I', CASE t.relkind WHEN 'v' THEN 'VIEW' ELSE 'TABLE' END, {schema_lit}, t.relname, {owner_lit});
        EXECUTE format('REVOKE ALL ON %I.%I FROM PUBLIC', {schema_lit}, t.relname);
        EXECUTE format('REVOKE INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER ON %I.%I FROM %I, %I', {schema_lit}, t.relname, {app_lit}, {readonly_lit});
        EXECUTE format('GRANT SELECT ON %I.%I TO %I, %I', {schema_lit}, t.relname, {app_lit}, {readonly_lit});
        IF t.relname IN ('rlmm_partitions', 'rlmm_segments', 'rlmm_segment_epochs') THEN
            EXECUTE format('GRANT INSERT, UPDATE ON %I.%I TO %I', {schema_lit}, t.relname, {app_lit});
        END IF;
    END LOOP;
    FOR t IN
        SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = {schema_lit} AND c.relkind = 'S' AND c.relname LIKE 'rlmm\_%'
    LOOP
        IF t.relname = 'rlmm_versions' THEN
            EXECUTE format('ALTER SEQUENCE %I.%I OWNER TO %I', {schema_lit}, t.relname, {owner_lit});
        END IF;
        EXECUTE format('REVOKE ALL ON SEQUENCE %I.%I FROM PUBLIC, %I', {schema_lit}, t.relname, {app_lit});
        EXECUTE format('GRANT SELECT ON SEQUENCE %I.%I TO %I', {schema_lit}, t.relname, {readonly_lit});
        IF t.relname = 'rlmm_versions' THEN
            EXECUTE format('GRANT USAGE ON SEQUENCE %I.%I TO %I', {schema_lit}, t.relname, {app_lit});
        END IF;
    END LOOP;
    FOR t IN
        SELECT p.oid::regprocedure AS fn, p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = {schema_lit} AND p.proname LIKE 'rlmm\_%'
    LOOP
        EXECUTE format('ALTER FUNCTION %s OWNER TO %I', t.fn, {owner_lit});
        -- The repair functions run as the owner (SECURITY DEFINER): only
        -- the DBA role may call them, and brokers the purge's round.
        IF t.proname IN ('rlmm_set_segment_state', 'rlmm_set_partition_delete_state', 'rlmm_resync', 'rlmm_purge', 'rlmm_purge_round') THEN
            EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC, %I, %I', t.fn, {app_lit}, {readonly_lit});
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', t.fn, {dba_lit});
        END IF;
        IF t.proname = 'rlmm_purge_round' THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', t.fn, {app_lit});
        END IF;
    END LOOP;
END
$existing$;

COMMIT;
`
