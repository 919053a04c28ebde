package cache

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/krabka/remotestorage/internal/backoff"
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
	"Until then freshness falls back to the periodic poll and CaughtUp."

// listenerConnConfig returns the configuration of the listener's
// connection: WithListenerConnConfig's, else the pool's, with a probe run
// after connecting that warns when notifications would not arrive.
func (c *Cache) listenerConnConfig() *pgx.ConnConfig {
	if cfg := c.cfg.ListenerConnConfig; cfg != nil {
		return cfg.Copy()
	}
	cfg := c.cfg.Pool.Config().ConnConfig.Copy()
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
func (c *Cache) probeListener(ctx context.Context, conn *pgconn.PgConn) {
	var random [8]byte
	_, _ = rand.Read(random[:])
	channel := "rlmm_listener_probe_" + hex.EncodeToString(random[:])
	if err := conn.Exec(ctx, "LISTEN "+channel).Close(); err != nil {
		return
	}
	defer func() { _ = conn.Exec(context.WithoutCancel(ctx), "UNLISTEN "+channel).Close() }()
	if _, err := c.cfg.Pool.Exec(ctx, "SELECT pg_notify($1, 'probe')", channel); err != nil {
		return
	}
	wait, cancel := context.WithTimeout(ctx, listenerProbeTimeout)
	defer cancel()
	start := time.Now()
	err := conn.WaitForNotification(wait)
	if err == nil || ctx.Err() != nil {
		return // heard (nothing else is listened to yet), or shutting down
	}
	logger := c.cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger.LogAttrs(ctx, slog.LevelWarn, listenerWarning,
		slog.String("host", conn.Conn().RemoteAddr().String()),
		slog.Duration("waited", time.Since(start)), slog.Any("error", err))
}

// listen keeps a connection listening on notifyChannel, reconnecting with
// backoff, and wakes the followers of the partitions notified. After each
// (re)connect every partition catches up, for what was missed meanwhile.
// It logs when it stops listening and when it listens again, not each
// failed attempt in between: meanwhile queries keep answering from the
// cache, and the poll and CaughtUp keep it honest.
func (c *Cache) listen() {
	retry := backoff.New()
	failed := 0 // attempts since the listener last listened
	listening := func() {
		if failed > 0 {
			c.cfg.Info("the cache's listener listens again", "failed_attempts", failed)
		}
		failed = 0
		retry.Reset()
	}
	for c.ctx.Err() == nil {
		err := c.listenOnce(listening)
		if c.ctx.Err() != nil {
			return
		}
		if failed == 0 {
			c.cfg.Warn("the cache's listener is not listening; it retries with backoff, and until then the cache catches up by its poll and CaughtUp", "error", err)
		}
		failed++
		select {
		case <-c.ctx.Done():
			return
		case <-time.After(retry.Next()):
		}
	}
}

// listenOnce connects and listens until the connection fails, calling
// listening once the LISTEN holds.
func (c *Cache) listenOnce(listening func()) error {
	connect := pgx.ConnectConfig // WithListenerConnConfig: straight to its server
	if c.cfg.ListenerConnConfig == nil {
		connect = func(ctx context.Context, cfg *pgx.ConnConfig) (*pgx.Conn, error) {
			return connectLikePool(ctx, c.cfg.Pool, cfg)
		}
	}
	conn, err := connect(c.ctx, c.listenerConnConfig())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(c.ctx, "LISTEN "+notifyChannel); err != nil {
		return err
	}
	defer c.test.listening.Store(false)
	c.mu.Lock()
	c.test.listening.Store(true)
	c.wakeAll()
	c.mu.Unlock()
	c.test.signals.Listening.Signal(int(c.test.connections.Add(1)))
	listening()
	for {
		n, err := conn.WaitForNotification(c.ctx)
		if err != nil {
			return err
		}
		c.test.signals.Heard.Signal(n.Payload)
		if c.test.dropNotifications.Load() {
			continue
		}
		if strings.HasPrefix(n.Payload, resetNotificationPrefix) {
			// The data's generation moved (a TRUNCATE): every partition
			// checks, and reloads.
			c.mu.RLock()
			c.wakeAll()
			c.mu.RUnlock()
			continue
		}
		key, order, ok := parseNotification(n.Payload)
		if !ok {
			continue
		}
		c.heard(key, order)
	}
}
