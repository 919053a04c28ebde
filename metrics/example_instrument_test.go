package metrics_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	rs "github.com/krabka/remotestorage"
	"github.com/krabka/remotestorage/metrics"
)

// Logs and metrics for any manager: Instrument wraps it. Refused writes are
// logged at Debug, store failures at Warn; every call is timed, and every
// failure counted by the sentinel error it wraps.
func ExampleInstrument() {
	ctx := context.Background()
	reg := prometheus.NewRegistry() // or prometheus.DefaultRegisterer, served by promhttp
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "duration" {
				return slog.Attr{} // keep the example's output stable
			}
			return a
		},
	}))
	m := metrics.Instrument(rs.NewInMemoryManager(), metrics.WithLogger(logger), metrics.WithRegisterer(reg))

	tp := rs.TopicIDPartition{TopicID: uuid.MustParse("6fd630dd-c4fb-4485-aaad-5347f29cf952"), Topic: "orders", Partition: 0}
	id := rs.RemoteLogSegmentID{TopicIDPartition: tp, ID: uuid.MustParse("0b7f4c1e-3f0a-4c55-9d0e-6a3f1c2b9e11")}
	_ = m.UpdateRemoteLogSegmentMetadata(ctx, rs.RemoteLogSegmentMetadataUpdate{SegmentID: id, State: rs.CopySegmentFinished})

	families, _ := reg.Gather()
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			if f.GetName() == "rlmm_operation_errors_total" && metric.GetCounter().GetValue() > 0 {
				var labels []string
				for _, l := range metric.GetLabel() {
					labels = append(labels, l.GetName()+"="+l.GetValue())
				}
				fmt.Println(f.GetName(), strings.Join(labels, " "), metric.GetCounter().GetValue())
			}
		}
	}
	// Output:
	// level=DEBUG msg="remotestorage: write refused" op=UpdateRemoteLogSegmentMetadata topic=orders partition=0 topic_id=6fd630dd-c4fb-4485-aaad-5347f29cf952 segment_id=0b7f4c1e-3f0a-4c55-9d0e-6a3f1c2b9e11 state=COPY_SEGMENT_FINISHED error_kind=segment_not_found error="remotestorage: segment not found: segment 0b7f4c1e-3f0a-4c55-9d0e-6a3f1c2b9e11 in partition orders-0 (6fd630dd-c4fb-4485-aaad-5347f29cf952)"
	// rlmm_operation_errors_total error=segment_not_found operation=UpdateRemoteLogSegmentMetadata 1
}

// spanNames is a pgx tracer that prints the query name sqlc puts at the
// top of every statement ("-- name: SegmentLookup :one"): a good span name.
// In production, use a tracing library's pgx tracer instead, for example
// github.com/exaring/otelpgx: cfg.ConnConfig.Tracer = otelpgx.NewTracer().
type spanNames struct{}

func (spanNames) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	name, _, _ := strings.Cut(strings.TrimPrefix(data.SQL, "-- name: "), " ")
	fmt.Println("span:", name)
	return ctx
}

func (spanNames) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// Tracing is the pool's: the manager sends every statement through the
// *pgxpool.Pool you give it, so a pgx tracer on the pool's configuration sees
// each one, in the context of the call (with its parent span). Metrics and
// logs come from Instrument; WithPoolStats adds the pool's statistics.
func ExampleInstrument_tracing() {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	cfg.ConnConfig.Tracer = spanNames{} // e.g. otelpgx.NewTracer()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	pg, err := rs.NewPgManager(ctx, pool)
	if err != nil {
		panic(err)
	}
	m := metrics.Instrument(pg,
		metrics.WithLogger(slog.Default()),
		metrics.WithRegisterer(prometheus.DefaultRegisterer),
		metrics.WithPoolStats("primary", pool))
	defer m.Close()

	tp := rs.TopicIDPartition{TopicID: uuid.New(), Topic: "orders", Partition: 0}
	_, _, err = m.RemoteLogSegmentMetadata(ctx, tp, 0, 1234) // span: SegmentLookup
	if err != nil {
		panic(err)
	}
}
