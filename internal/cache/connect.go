package cache

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// connectLikePool connects with cfg, a copy of pool's connection settings,
// as pool connects its own connections: after pool's BeforeConnect, which
// holds ConfigurePool's connect backoff (so that an outage costs no more
// attempts than the pool's) and whatever the caller set there, such as a
// rotated password.
func connectLikePool(ctx context.Context, pool *pgxpool.Pool, cfg *pgx.ConnConfig) (*pgx.Conn, error) {
	if before := pool.Config().BeforeConnect; before != nil {
		if err := before(ctx, cfg); err != nil {
			return nil, err
		}
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// connectTracer keeps the connect tracing of a tracer (ConfigurePool's
// backoff learns each attempt's outcome from it) and drops its statements.
type connectTracer struct{ connect pgx.ConnectTracer }

// connectTracerOf returns t's connect tracing alone; nil when it has none.
func connectTracerOf(t pgx.QueryTracer) pgx.QueryTracer {
	if ct, ok := t.(pgx.ConnectTracer); ok {
		return connectTracer{connect: ct}
	}
	return nil
}

func (t connectTracer) TraceConnectStart(ctx context.Context, data pgx.TraceConnectStartData) context.Context {
	return t.connect.TraceConnectStart(ctx, data)
}

func (t connectTracer) TraceConnectEnd(ctx context.Context, data pgx.TraceConnectEndData) {
	t.connect.TraceConnectEnd(ctx, data)
}

func (connectTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (connectTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
