// Package metrics exports what the remotestorage managers do as Prometheus
// metrics and structured logs: Instrument wraps any remotestorage.Manager
// with latency histograms, error counters and one log record per failed
// call, and StuckCollector reports the work a crashed or stuck broker left
// behind as gauges.
//
// It is a package of its own so that the library (package remotestorage)
// links no Prometheus client: brokers that export metrics another way do
// not carry it. docs/OPERATIONS.md lists the metrics and the alerts.
package metrics
