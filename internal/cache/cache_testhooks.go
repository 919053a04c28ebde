package cache

import (
	"github.com/google/uuid"

	"github.com/krabka/remotestorage/internal/partition"
	"github.com/krabka/remotestorage/internal/testsignal"
)

// The cache's hooks for tests: the root package's export_test.go passes
// them on to its tests. Each does nothing unless a test sets or
// initialises it.

// TestSignals are the events the cache emits for tests.
type TestSignals struct {
	// CaughtUp: a load or catch-up of the partition was applied.
	CaughtUp testsignal.Signal[partition.TopicIDPartition]
	// Listening: the listener listens, on its nth connection since the
	// cache started (1 for the first).
	Listening testsignal.Signal[int]
	// Heard: the listener received a notification (its payload), before
	// it acts on it or drops it.
	Heard testsignal.Signal[string]
}

// Init initialises the signals.
func (s *TestSignals) Init() {
	s.CaughtUp.Init()
	s.Listening.Init()
	s.Heard.Init()
}

// TestSignals returns the cache's test signals; they keep their events
// once the test calls their Init.
func (c *Cache) TestSignals() *TestSignals { return &c.test.signals }

// DropNotifications makes the listener ignore every notification, as if
// they were lost.
func (c *Cache) DropNotifications(drop bool) { c.test.dropNotifications.Store(drop) }

// BeforeCatchUp runs hook before each catch-up (loaded is false for the
// load).
func (c *Cache) BeforeCatchUp(hook func(tp partition.TopicIDPartition, loaded bool)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.test.beforeCatchUp = hook
}

// AfterCatchUpRead runs hook after each catch-up's reads, before the
// catch-up applies them (reload is true when it read the whole partition
// again).
func (c *Cache) AfterCatchUpRead(hook func(tp partition.TopicIDPartition, reload bool)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.test.afterRead = hook
}

// DiscardPendingCatchUp discards the catch-up of tp asked for and not
// started, if any.
func (c *Cache) DiscardPendingCatchUp(tp partition.TopicIDPartition) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if cp := c.partitions[partition.KeyOf(tp)]; cp != nil {
		cp.discardWake()
	}
}

// ListenerConnections returns how many times the listener has listened
// since the cache started.
func (c *Cache) ListenerConnections() int64 { return c.test.connections.Load() }

// Listening reports whether the listener is connected and listening.
func (c *Cache) Listening() bool { return c.test.listening.Load() }

// HoldsSegment reports whether tp's cached data holds segment id at
// lastVersion or newer (forgotten included).
func (c *Cache) HoldsSegment(tp partition.TopicIDPartition, id uuid.UUID, lastVersion int64) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.partitions[partition.KeyOf(tp)].holdsWrite(id, lastVersion)
}
