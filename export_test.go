package remotestorage

// Test hooks into PgManager's cache.

// DropNotifications makes the cache's listener ignore every notification,
// as if they were lost.
func (m *PgManager) DropNotifications(drop bool) { m.cache.dropNotifications.Store(drop) }

// BeforeCatchUp runs hook before each catch-up of a cached partition
// (loaded is false for the load). Set it before assigning partitions.
func (m *PgManager) BeforeCatchUp(hook func(tp TopicIDPartition, loaded bool)) {
	m.cache.mu.Lock()
	defer m.cache.mu.Unlock()
	m.cache.beforeCatchUp = hook
}

// ListenerConnected returns a channel closed at the listener's next
// (re)connection.
func (m *PgManager) ListenerConnected() <-chan struct{} {
	m.cache.mu.RLock()
	defer m.cache.mu.RUnlock()
	return m.cache.listening
}

// Listening reports whether the cache's listener is connected and listening.
func (m *PgManager) Listening() bool { return m.cache.connected.Load() }
