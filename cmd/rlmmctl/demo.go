package main

// demo.go: `rlmmctl demo`, a simulated Kafka cluster tiering segments
// through the whole lifecycle against a real database, then a report. It
// is the quickest way to see the store work, and doubles as a smoke test:
// every write also goes to the in-memory reference (InMemoryManager), and
// the demo fails (exit 1) when the store answers differently.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/internal/pgcluster"
)

// demoDatabase is the database created in a throwaway cluster.
const demoDatabase = "rlmm_demo"

type demoOptions struct {
	keep       bool
	brokers    int
	topics     int
	partitions int
	segments   int
	seed       uint64
}

func (a *app) demoCommand() *cobra.Command {
	var o demoOptions
	cmd := &cobra.Command{
		Use:   "demo [--keep] [--brokers N] [--topics N] [--partitions N] [--segments N]",
		Short: "Simulate brokers tiering segments through the whole lifecycle, then report",
		Long: `Run a simulated Kafka cluster against a real database and report what the
store holds. Several brokers - each a PgManager over its own connection
pool, as separate broker processes would be - tier the segments of several
topics, each with a few partitions, concurrently:

  - every segment is copied: COPY_SEGMENT_STARTED, then COPY_SEGMENT_FINISHED;
  - half-way, a leadership change moves each partition to another broker
    and bumps the leader epoch from 0 to 1: one segment spans both epochs,
    later segments carry only the new one;
  - retention deletes the oldest quarter of the segments:
    DELETE_SEGMENT_STARTED, then DELETE_SEGMENT_FINISHED;
  - partition 0 of each topic keeps an upload and a deletion in flight;
  - a stale leader and a late add are refused, as the state machine requires;
  - the last topic is deleted: DELETE_PARTITION_MARKED, its segments
    deleted, DELETE_PARTITION_STARTED, DELETE_PARTITION_FINISHED.

The report shows, per topic, the segments per state and their bytes; lookups
that hit and lookups that miss, each with the reason; the highest offset of
each epoch; and the psql command that opens the same data.

The database: with no --database-url, no DATABASE_URL and no PGHOST, the
demo starts a throwaway PostgreSQL cluster from the local server binaries
(initdb, pg_ctl; apt-get install postgresql), creates the database
` + demoDatabase + ` and migrates it. It stops and deletes the cluster at the
end unless --keep, which leaves it running for psql and prints how to stop
it. With a configured database the demo migrates it (like "migrate up") and
adds its topics there, under fresh random topic ids.

Every write also goes to the library's in-memory reference manager
(InMemoryManager); the demo checks every answer against it and exits 1 when
the store answers differently.

` + databaseHelp,
		Example: `  rlmmctl demo                        # throwaway cluster, deleted at the end
  rlmmctl demo --keep                 # ... left running, to explore with psql
  DATABASE_URL=postgres://rlmm:rlmm@localhost:5432/rlmm rlmmctl demo --segments 100`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case o.brokers < 1 || o.brokers > 64:
				return usageErrorf("--brokers %d: want 1 to 64", o.brokers)
			case o.topics < 2 || o.topics > 100:
				return usageErrorf("--topics %d: want 2 to 100 (the last one is deleted)", o.topics)
			case o.partitions < 1 || o.partitions > 100:
				return usageErrorf("--partitions %d: want 1 to 100", o.partitions)
			case o.segments < 4 || o.segments > 100000:
				return usageErrorf("--segments %d: want 4 to 100000 (the lifecycle needs at least 4)", o.segments)
			}
			return a.runDemo(cmd.Context(), o)
		},
	}
	cmd.Flags().BoolVar(&o.keep, "keep", false, "leave the throwaway cluster running (and print how to stop it)")
	cmd.Flags().IntVar(&o.brokers, "brokers", 3, "number of simulated brokers")
	cmd.Flags().IntVar(&o.topics, "topics", 3, "number of topics (the last one is deleted)")
	cmd.Flags().IntVar(&o.partitions, "partitions", 3, "partitions per topic")
	cmd.Flags().IntVar(&o.segments, "segments", 20, "segments per partition")
	cmd.Flags().Uint64Var(&o.seed, "seed", 1, "seed of the segment sizes and timestamps")
	return cmd
}

func (a *app) runDemo(ctx context.Context, o demoOptions) (err error) {
	out := a.stdout
	fmt.Fprintf(out, "rlmmctl demo: %d brokers tier %d topics × %d partitions × %d segments through the whole lifecycle\n",
		o.brokers, o.topics, o.partitions, o.segments)

	// The database.
	fmt.Fprintf(out, "\nDatabase\n")
	src := resolveDatabase(a.databaseURL)
	var cluster *pgcluster.Cluster
	if !src.configured() {
		if cluster, err = a.startThrowaway(ctx); err != nil {
			return err
		}
		// Last, after the pools are closed: keep the cluster (--keep, when
		// the demo succeeded) or stop and delete it.
		defer func() {
			if finishErr := a.finishThrowaway(cluster, o.keep && err == nil); err == nil {
				err = finishErr
			}
		}()
		src = dbSource{dsn: cluster.URL(demoDatabase), from: "the throwaway cluster"}
	} else if o.keep {
		fmt.Fprintf(out, "  (--keep only matters for a throwaway cluster: a configured database keeps the data anyway)\n")
	}
	pool, err := openPool(ctx, src, a.scrub, 4)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := remotestorage.Migrate(ctx, pool); err != nil {
		return err
	}
	if cluster != nil {
		fmt.Fprintf(out, "  database %s created, migrated to schema version %d\n", demoDatabase, remotestorage.SchemaVersion)
	} else {
		fmt.Fprintf(out, "  database %s, migrated to schema version %d\n", src, remotestorage.SchemaVersion)
	}

	// The brokers: a manager each, over a pool of its own, as separate
	// broker processes would have.
	d := &demoRun{o: o, reference: remotestorage.NewInMemoryManager()}
	for range o.brokers {
		bp, err := openPool(ctx, src, a.scrub, 4)
		if err != nil {
			return err
		}
		defer bp.Close()
		m, err := remotestorage.NewPgManager(ctx, bp)
		if err != nil {
			return err
		}
		defer m.Close()
		d.managers = append(d.managers, m)
	}
	d.plan()

	fmt.Fprintf(out, "\nSimulation\n")
	d.describe(a)
	start := time.Now()
	if err := d.simulate(ctx, a); err != nil {
		return err
	}
	elapsed := time.Since(start)
	fmt.Fprintf(out, "  done: %d metadata writes in %s (%.0f writes/s)\n",
		d.writes.Load(), elapsed.Round(time.Millisecond), float64(d.writes.Load())/elapsed.Seconds())

	if err := d.reportTopics(ctx, a, pool); err != nil {
		return err
	}
	d.reportRefusals(a)
	if err := d.reportLookups(ctx, a); err != nil {
		return err
	}
	if err := d.reportHighestOffsets(ctx, a); err != nil {
		return err
	}
	a.reportOpenData(src, cluster, o.keep)

	if len(d.unexpected) > 0 {
		return fmt.Errorf("the store answered %d times differently than the in-memory reference:\n  %s",
			len(d.unexpected), strings.Join(d.unexpected, "\n  "))
	}
	return nil
}
