package remotestorage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// listenerProbeTimeout bounds the wait for the probe notification. Heard,
// it arrives within milliseconds; the wait only delays the listener when
// notifications do not reach it.
const listenerProbeTimeout = 3 * time.Second

// listenerWarning is the warning logged when the listener does not hear its
// probe; it names the fix.
const listenerWarning = "remotestorage: the cache's LISTEN connection did not hear a probe notification sent through the pool: " +
	"the pool probably goes through a transaction pooler (PgBouncer pool_mode=transaction), where LISTEN does not hold. " +
	"Give the listener a session connection with remotestorage.WithListenerConnConfig (a direct DSN to the primary). " +
	"Until then freshness falls back to the periodic version poll and CaughtUp."

// listenerConnConfig returns the configuration of the listener's
// connection: WithListenerConnConfig's, else the pool's, with a probe run
// after connecting that warns when notifications would not arrive.
func (c *pgCache) listenerConnConfig() *pgx.ConnConfig {
	if cfg := c.m.opts.listenerConnConfig; cfg != nil {
		return cfg.Copy()
	}
	cfg := c.m.pool.Config().ConnConfig.Copy()
	after := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, conn *pgconn.PgConn) error {
		if after != nil {
			if err := after(ctx, conn); err != nil {
				return err
			}
		}
		c.probeListener(ctx, conn)
		return nil
	}
	return cfg
}

// probeListener listens on a channel of its own on conn, notifies it
// through the manager's pool (another client connection), and warns unless
// conn hears it. Any failure only skips the check: the listener's own
// LISTEN reports a broken connection.
func (c *pgCache) probeListener(ctx context.Context, conn *pgconn.PgConn) {
	var random [8]byte
	_, _ = rand.Read(random[:])
	channel := "rlmm_listener_probe_" + hex.EncodeToString(random[:])
	if err := conn.Exec(ctx, "LISTEN "+channel).Close(); err != nil {
		return
	}
	defer func() { _ = conn.Exec(context.WithoutCancel(ctx), "UNLISTEN "+channel).Close() }()
	if _, err := c.m.pool.Exec(ctx, "SELECT pg_notify($1, 'probe')", channel); err != nil {
		return
	}
	wait, cancel := context.WithTimeout(ctx, listenerProbeTimeout)
	defer cancel()
	start := time.Now()
	err := conn.WaitForNotification(wait)
	if err == nil || ctx.Err() != nil {
		return // heard (nothing else is listened to yet), or shutting down
	}
	logger := c.m.opts.logger
	if logger == nil {
		logger = slog.Default()
	}
	logger.LogAttrs(ctx, slog.LevelWarn, listenerWarning,
		slog.String("host", conn.Conn().RemoteAddr().String()),
		slog.Duration("waited", time.Since(start)), slog.Any("error", err))
}
