package remotestorage

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// notifier tells other managers' caches of this manager's writes, after
// they commit: on a connection of its own, one statement notifies every
// partition written since its previous send, so no write statement calls
// pg_notify (whose commits PostgreSQL serialises on one global lock). A lost
// notification only delays a cache: docs/SCALING.md ("How the cache stays
// fresh") says what bounds it.
type notifier struct {
	side *sideConn
	log  func(msg string, args ...any)

	mu      sync.Mutex
	pending map[partitionKey]int64 // the newest version written per partition
	started bool
	closing bool
	wake    chan struct{} // capacity 1
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
}

func newNotifier(side *sideConn, log func(msg string, args ...any)) *notifier {
	ctx, cancel := context.WithCancel(context.Background())
	return &notifier{side: side, log: log, pending: make(map[partitionKey]int64), wake: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// notify queues the news that tp reached version. It never blocks; the
// sender starts with the first write.
func (n *notifier) notify(tp TopicIDPartition, version int64) {
	key := keyOf(tp)
	n.mu.Lock()
	if n.ctx.Err() != nil {
		n.mu.Unlock()
		return // closed
	}
	if n.pending[key] < version {
		n.pending[key] = version
	}
	if !n.started {
		n.started = true
		go n.run()
	}
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// close stops the sender once it has sent what is queued, or after a
// second at most. It may be called again, and concurrently: every call
// returns once the sender, if one ever started, has stopped.
func (n *notifier) close() {
	n.mu.Lock()
	started := n.started
	n.started, n.closing = true, true // no sender starts after close
	n.mu.Unlock()
	if !started {
		// No sender ever ran, and none will: done is this call's to close,
		// so that a later close, which finds started set, returns too.
		n.cancel()
		close(n.done)
		return
	}
	flush := time.AfterFunc(time.Second, n.cancel)
	defer flush.Stop()
	n.poke()
	<-n.done
	n.cancel()
}

func (n *notifier) run() {
	defer close(n.done)
	backoff := newBackoff()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.wake:
		}
		n.mu.Lock()
		batch, closing := n.pending, n.closing
		n.pending = make(map[partitionKey]int64, len(batch))
		n.mu.Unlock()
		if len(batch) == 0 {
			if closing {
				return
			}
			continue
		}
		if err := n.send(batch); err != nil {
			n.log("notifying other caches failed; they catch up by their version poll", "partitions", len(batch), "error", err)
			n.requeue(batch)
			select {
			case <-n.ctx.Done():
				return
			case <-time.After(backoff.next()):
			}
		} else {
			backoff.reset()
		}
		n.poke() // what came in meanwhile, or the close
	}
}

func (n *notifier) poke() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// requeue puts back a batch that could not be sent, under newer versions.
func (n *notifier) requeue(batch map[partitionKey]int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for k, v := range batch {
		if n.pending[k] < v {
			n.pending[k] = v
		}
	}
}

// send notifies every partition of batch in one statement.
func (n *notifier) send(batch map[partitionKey]int64) error {
	ctx, cancel := context.WithTimeout(n.ctx, 5*time.Second)
	defer cancel()
	payloads := make([]string, 0, len(batch))
	for k, v := range batch {
		payloads = append(payloads, notificationPayload(k, v))
	}
	return n.side.do(ctx, func(conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p", notifyChannel, payloads)
		return err
	})
}

func notificationPayload(k partitionKey, version int64) string {
	return k.topicID.String() + "/" + strconv.FormatInt(int64(k.partition), 10) + "/" + strconv.FormatInt(version, 10)
}

// sideConn is a manager's connection for its own background statements
// (notifications, the cache's version poll): opened on first use, as the
// pool opens its connections, but tracing only the connect, not the
// statements (they are not the caller's), and never
// taking a connection the callers' pool may be short of. One statement at
// a time; a failed statement closes it, the next use reopens it.
type sideConn struct {
	pool *pgxpool.Pool

	mu   sync.Mutex
	conn *pgx.Conn
}

func (c *sideConn) do(ctx context.Context, f func(conn *pgx.Conn) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil || c.conn.IsClosed() {
		cfg := c.pool.Config().ConnConfig.Copy()
		cfg.Tracer = connectTracerOf(cfg.Tracer)
		conn, err := connectLikePool(ctx, c.pool, cfg)
		if err != nil {
			return err
		}
		c.conn = conn
	}
	if err := f(c.conn); err != nil {
		c.conn.Close(context.Background())
		c.conn = nil
		return err
	}
	return nil
}

func (c *sideConn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		c.conn.Close(context.Background())
		c.conn = nil
	}
}

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
