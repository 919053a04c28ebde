package cache

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/krabka/remotestorage/internal/backoff"
	"github.com/krabka/remotestorage/internal/partition"
)

// Notifier tells other managers' caches of this manager's writes, after
// they commit: on a connection of its own, one statement notifies every
// partition written since its previous send, so no write statement calls
// pg_notify (whose commits PostgreSQL serialises on one global lock). A lost
// notification only delays a cache: docs/SCALING.md ("How the cache stays
// fresh") says what bounds it.
type Notifier struct {
	side *SideConn
	log  func(msg string, args ...any)

	mu      sync.Mutex
	pending map[partition.Key]int64 // the newest version written per partition
	started bool
	closing bool
	woken   chan struct{} // capacity 1: a pending wake-up of the sender
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
}

func NewNotifier(side *SideConn, log func(msg string, args ...any)) *Notifier {
	ctx, cancel := context.WithCancel(context.Background())
	return &Notifier{side: side, log: log, pending: make(map[partition.Key]int64), woken: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// Notify queues the news that partition key reached version. It never
// blocks; the sender starts with the first write.
func (n *Notifier) Notify(key partition.Key, version int64) {
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
	n.wake()
}

// Close stops the sender once it has sent what is queued, or after a
// second at most. It may be called again, and concurrently: every call
// returns once the sender, if one ever started, has stopped.
func (n *Notifier) Close() {
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
	n.wake()
	<-n.done
	n.cancel()
}

func (n *Notifier) run() {
	defer close(n.done)
	retry := backoff.New()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.woken:
		}
		n.mu.Lock()
		batch, closing := n.pending, n.closing
		n.pending = make(map[partition.Key]int64, len(batch))
		n.mu.Unlock()
		if len(batch) == 0 {
			if closing {
				return
			}
			continue
		}
		if err := n.send(batch); err != nil {
			n.log("notifying other caches failed; they catch up by their poll", "partitions", len(batch), "error", err)
			n.requeue(batch)
			select {
			case <-n.ctx.Done():
				return
			case <-time.After(retry.Next()):
			}
		} else {
			retry.Reset()
		}
		n.wake() // what came in meanwhile, or the close
	}
}

// wake asks the sender to look at what is queued, without waiting.
func (n *Notifier) wake() {
	select {
	case n.woken <- struct{}{}:
	default:
	}
}

// requeue puts back a batch that could not be sent, under newer versions.
func (n *Notifier) requeue(batch map[partition.Key]int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for k, v := range batch {
		if n.pending[k] < v {
			n.pending[k] = v
		}
	}
}

// send notifies every partition of batch in one statement.
func (n *Notifier) send(batch map[partition.Key]int64) error {
	ctx, cancel := context.WithTimeout(n.ctx, 5*time.Second)
	defer cancel()
	payloads := make([]string, 0, len(batch))
	for k, v := range batch {
		payloads = append(payloads, notificationPayload(k, v))
	}
	return n.side.Do(ctx, func(conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p", notifyChannel, payloads)
		return err
	})
}
