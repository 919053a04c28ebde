package main

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage/internal/pgtest"
)

func TestRedactDSN(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ dsn, masked, removed string }{
		{"postgres://rlmm:s3cretpw@db:5432/rlmm?sslmode=disable",
			"postgres://rlmm:xxxxx@db:5432/rlmm?sslmode=disable",
			"postgres://rlmm@db:5432/rlmm?sslmode=disable"},
		{"postgresql://rlmm@db/rlmm", "postgresql://rlmm@db/rlmm", "postgresql://rlmm@db/rlmm"},
		// Multi-host URLs, which net/url cannot parse.
		{"postgres://rlmm:s3cretpw@db1:5432,db2:5432/rlmm",
			"postgres://rlmm:xxxxx@db1:5432,db2:5432/rlmm",
			"postgres://rlmm@db1:5432,db2:5432/rlmm"},
		// Raw "@" and "/" in a password.
		{"postgres://rlmm:s3c@ret/pw@db/rlmm", "postgres://rlmm:xxxxx@db/rlmm", "postgres://rlmm@db/rlmm"},
		// A raw "?" in a password.
		{"postgres://rlmm:s3c?retpw@db/rlmm", "postgres://rlmm:xxxxx@db/rlmm", "postgres://rlmm@db/rlmm"},
		// A password as a query parameter.
		{"postgres://rlmm@db/rlmm?password=s3cretpw&sslmode=disable",
			"postgres://rlmm@db/rlmm?password=xxxxx&sslmode=disable",
			"postgres://rlmm@db/rlmm?sslmode=disable"},
		{"postgres://db/rlmm?sslmode=disable&password=s3cretpw",
			"postgres://db/rlmm?sslmode=disable&password=xxxxx",
			"postgres://db/rlmm?sslmode=disable"},
		// Keyword/value form, quoted or not.
		{"host=db user=rlmm password=s3cretpw dbname=rlmm",
			"host=db user=rlmm password=xxxxx dbname=rlmm",
			"host=db user=rlmm dbname=rlmm"},
		{"host=db password = 's3c ret\\'pw' dbname=rlmm",
			"host=db password=xxxxx dbname=rlmm",
			"host=db dbname=rlmm"},
	} {
		require.Equal(t, tc.masked, redactDSN(tc.dsn, redactedPassword), tc.dsn)
		require.Equal(t, tc.removed, redactDSN(tc.dsn, ""), tc.dsn)
	}
}

func TestPasswordsIn(t *testing.T) {
	t.Parallel()
	require.Contains(t, passwordsIn("postgres://u:s3cret%40pw@h/d"), "s3cret@pw")
	require.Contains(t, passwordsIn("postgres://u:s3cret%40pw@h/d"), "s3cret%40pw")
	require.Equal(t, []string{"s3c ret'pw"}, passwordsIn(`host=h password='s3c ret\'pw'`))
	require.Contains(t, passwordsIn("postgres://u@h/d?password=s3cretpw"), "s3cretpw")
	require.Empty(t, passwordsIn("postgres://u@h/d"))
}

func TestScrubber(t *testing.T) {
	t.Parallel()
	s := &scrubber{secrets: map[string]bool{}}
	s.addDSN("postgres://u:s3cret%40pw@h/d")
	s.add("abc") // too short to scrub without mangling text
	require.Equal(t, "failed for s3cret=xxxxx and xxxxx, abc",
		s.scrub("failed for s3cret=s3cret@pw and s3cret%40pw, abc"))
	var b strings.Builder
	_, err := s.writer(&b).Write([]byte("pw s3cret@pw\n"))
	require.NoError(t, err)
	require.Equal(t, "pw xxxxx\n", b.String())
}

// TestPasswordNeverPrinted points every command at a server that does not
// answer, with a password in every way a password can be given, and checks
// that neither the error nor anything else shows it.
func TestPasswordNeverPrinted(t *testing.T) {
	t.Parallel()
	const pw = "s3cretpw"
	closed := "postgres://postgres:" + pw + "@127.0.0.1:1/rlmm?sslmode=disable&connect_timeout=5"
	commands := [][]string{
		{"migrate", "up"},
		{"migrate", "status"},
		{"migrate", "down"},
		{"segments", "list", "--topic-id", "b9Yw3cT7RIWqrVNH8pz5Ug", "--partition", "0"},
		{"segments", "get", "6fd630dd-c4fb-4485-aaad-5347f29cf952"},
		{"lookup", "--topic-id", "b9Yw3cT7RIWqrVNH8pz5Ug", "--partition", "0", "--epoch", "0", "--offset", "0"},
		{"highest-offset", "--topic-id", "b9Yw3cT7RIWqrVNH8pz5Ug", "--partition", "0", "--epoch", "0"},
		{"partitions", "list"},
		{"purge"},
		{"demo", "--topics", "2", "--segments", "4"},
	}
	sources := []struct {
		name string
		env  []string
		args []string
	}{
		{"flag URL", nil, []string{"--database-url", closed}},
		{"flag URL, raw @ in password", nil, []string{"--database-url", "postgres://postgres:" + pw + "@x@127.0.0.1:1/rlmm?connect_timeout=5"}},
		{"flag URL, raw ? in password", nil, []string{"--database-url", "postgres://postgres:s3c?retpw@127.0.0.1:1/rlmm"}},
		{"flag URL, encoded password", nil, []string{"--database-url", "postgres://postgres:s3cret%40pw@127.0.0.1:1/rlmm?connect_timeout=5"}},
		{"flag URL, unparsable port", nil, []string{"--database-url=postgres://postgres:" + pw + "@127.0.0.1:notaport/rlmm"}},
		{"flag keyword/value", nil, []string{"--database-url", "host=127.0.0.1 port=1 user=postgres password=" + pw + " dbname=rlmm connect_timeout=5"}},
		{"flag keyword/value, spaces around =, unparsable port", nil, []string{"--database-url", "host=127.0.0.1 port=notaport user=postgres password = " + pw}},
		{"flag keyword/value, tabs, quoted", nil, []string{"--database-url", "host=127.0.0.1 port=notaport user=postgres\tpassword\t=\t'" + pw + "'"}},
		{"flag keyword/value, TLS key password", nil, []string{"--database-url", "host=127.0.0.1 port=1 sslmode=nonsense sslpassword = " + pw}},
		{"DATABASE_URL", []string{"DATABASE_URL=" + closed}, nil},
		{"PGPASSWORD", []string{"PGHOST=127.0.0.1", "PGPORT=1", "PGUSER=postgres", "PGPASSWORD=" + pw, "PGCONNECT_TIMEOUT=5"}, nil},
	}
	for _, src := range sources {
		t.Run(src.name, func(t *testing.T) {
			t.Parallel()
			// Every command for one source; for the others, the ones that
			// reach the database by different paths (a bare pool, a
			// PgManager, the demo).
			cmds := commands
			if src.name != "flag URL" {
				cmds = [][]string{commands[0], commands[3], commands[len(commands)-1]}
			}
			for _, command := range cmds {
				r := rlmmctl(t, src.env, append(append([]string{}, src.args...), command...)...)
				what := src.name + ": rlmmctl " + strings.Join(command, " ")
				require.Equal(t, exitFailure, r.code, "%s:\n%s", what, r.output())
				require.NotEmpty(t, r.stderr, what)
				for _, secret := range []string{pw, "s3cret@pw", "s3cret%40pw", "s3c?retpw"} {
					require.NotContains(t, r.output(), secret, what)
				}
			}
		})
	}
}

// TestPasswordRedactedWhenEchoed runs commands that succeed and echo the
// DSN, with a password in it.
func TestPasswordRedactedWhenEchoed(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewEmptyDatabase(t)
	cfg, err := pgx.ParseConfig(dsn)
	require.NoError(t, err)
	secret := cfg.Password
	if secret == "" || len(secret) < minSecretLen {
		if pgtest.Server(t).Kind != pgtest.FromLocal {
			t.Skip("the test server's DSN has no password to check, and may not accept a made-up one")
		}
		// The local cluster trusts every connection: any password works.
		secret = "s3cretpw"
		dsn = strings.Replace(dsn, "postgres://postgres@", "postgres://postgres:"+secret+"@", 1)
		require.Contains(t, dsn, secret)
	}
	up := ok(t, dsn, "migrate", "up")
	require.Contains(t, up, "xxxxx")
	for _, out := range []string{
		up,
		ok(t, dsn, "migrate", "status"),
		ok(t, dsn, "demo", "--topics", "2", "--partitions", "1", "--segments", "4"),
	} {
		require.NotContains(t, out, secret)
	}
}
