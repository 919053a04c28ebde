// Command driver writes the workload of package migrationdata through a
// PgManager and prints the outcome of each call and the answers of the
// probes as one JSON object (migrationdata.Result) on standard output. The
// migration data test builds it inside a copy of an older commit of this
// module, so that the data is written and read by that commit's code; it
// uses only what package migrationdata uses.
//
// Usage: driver -dsn DSN -seed N [-migrate]. The database must be at the
// commit's schema, or -migrate takes it there with the commit's own
// migrations first.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/migrationdata"
)

func main() {
	dsn := flag.String("dsn", "", "database URL")
	seed := flag.Uint64("seed", 1, "the workload's seed")
	migrate := flag.Bool("migrate", false, "migrate the database with the commit's migrations first")
	flag.Parse()
	if err := run(*dsn, *seed, *migrate); err != nil {
		fmt.Fprintln(os.Stderr, "driver:", err)
		os.Exit(1)
	}
}

func run(dsn string, seed uint64, migrate bool) error {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	if migrate {
		if err := rs.Migrate(ctx, pool); err != nil {
			return err
		}
	}
	m, err := rs.NewPgManager(ctx, pool)
	if err != nil {
		return err
	}
	defer m.Close()
	w := migrationdata.Generate(seed)
	res := migrationdata.Result{Outcomes: migrationdata.Apply(ctx, m, w), Answers: migrationdata.Answers(ctx, m, w)}
	return json.NewEncoder(os.Stdout).Encode(res)
}
