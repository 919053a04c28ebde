//go:build opskit

package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/krabka/remotestorage/deploy/promnames"
	"github.com/krabka/remotestorage/internal/pgtest"
	"github.com/krabka/remotestorage/internal/testwait"
	pb "github.com/krabka/remotestorage/proto/remotestorage/v1"
)

const (
	rulesFile     = "prometheus/rlmm-alerts.yml"
	rulesTestFile = "prometheus/rlmm-alerts.test.yml"
	jmxFile       = "prometheus/kafka-jmx-exporter.yml"
	dashboardFile = "grafana/rlmm-dashboard.json"
	runbookFile   = repo + "/docs/RUNBOOK.md"
	// kafkaGroup is the rule group on the broker's JMX exporter's series.
	kafkaGroup = "rlmm-kafka"
	// The labels Prometheus adds to what it scrapes from the rlmmd under test.
	testJob, testInstance = "rlmmd", "rlmmd-under-test"
)

// prometheusOwn are the series Prometheus writes itself for each target.
var prometheusOwn = map[string]bool{"up": true}

// busyRlmmd is a real rlmmd on a test database after what an operator's
// alerts watch has happened: writes (one refused), a read back, a CaughtUp
// of a partition it does not consume, a segment purged by its background
// purge and one stuck in COPY_SEGMENT_STARTED. It returns the last scrape.
func busyRlmmd(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	dsn := pgtest.NewDatabase(t)
	p := startProcess(t, []string{rlmmdBinary(t),
		"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
		"--stuck-older-than", "1ms", "--forgotten-retention", "1ms",
	}, environ(map[string]string{"DATABASE_URL": dsn, "RLMMD_REQUIRE_DATABASE_URL": "true"}))
	grpcAddr, metricsAddr := p.addresses(t)
	b := dialRlmmd(t, grpcAddr)
	b.healthy(t)

	done := b.addAndReadBack(t)
	tp := done.Id.TopicIdPartition
	_, err := b.client.AddSegment(callCtx(t), &pb.AddSegmentRequest{Segment: done})
	require.Error(t, err, "the same segment again: refused (invalid_add)")
	forgotten := newSegment(tp, 100, 199)
	_, err = b.client.AddSegment(callCtx(t), &pb.AddSegmentRequest{Segment: forgotten})
	require.NoError(t, err)
	b.update(t, forgotten, pb.SegmentState_SEGMENT_STATE_DELETE_SEGMENT_STARTED)
	b.update(t, forgotten, pb.SegmentState_SEGMENT_STATE_DELETE_SEGMENT_FINISHED)
	stuck := newSegment(tp, 200, 299)
	_, err = b.client.AddSegment(callCtx(t), &pb.AddSegmentRequest{Segment: stuck})
	require.NoError(t, err)
	r, err := b.client.CaughtUp(callCtx(t), &pb.CaughtUpRequest{TopicIdPartition: newTP()})
	require.NoError(t, err)
	require.False(t, r.GetCaughtUp(), "a partition rlmmd does not consume")

	var families map[string]*dto.MetricFamily
	// A series missing from the scrape does not hold the wait up: the
	// name check then says which (a renamed metric must fail there).
	holds := func(name string, labels map[string]string, ok func(float64) bool) bool {
		v, found := value(families, name, labels)
		return !found || ok(v)
	}
	testwait.Until(t, "the purge and the stuck segment in rlmmd's metrics", func() bool {
		families = scrape(t, metricsAddr)
		return holds("rlmm_purged_segments_total", nil, func(v float64) bool { return v >= 1 }) &&
			holds("rlmm_purge_last_success_timestamp_seconds", nil, func(v float64) bool { return v > 0 }) &&
			holds("rlmm_stuck_segments", map[string]string{"state": "COPY_SEGMENT_STARTED"}, func(v float64) bool { return v == 1 })
	})
	return families
}

// requireBusy checks the scrape of busyRlmmd shows what happened.
func requireBusy(t *testing.T, families map[string]*dto.MetricFamily) {
	t.Helper()
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   func(float64) bool
	}{
		{"rlmmd_serving", nil, func(v float64) bool { return v == 1 }},
		{"rlmm_purged_segments_total", nil, func(v float64) bool { return v >= 1 }},
		{"rlmm_purge_last_success_timestamp_seconds", nil, func(v float64) bool { return v > 0 }},
		{"rlmm_stuck_segments", map[string]string{"state": "COPY_SEGMENT_STARTED"}, func(v float64) bool { return v == 1 }},
		{"rlmm_operation_errors_total", map[string]string{"operation": "AddRemoteLogSegmentMetadata", "error": "invalid_add"}, func(v float64) bool { return v == 1 }},
		{"rlmm_caught_up_answers_total", map[string]string{"answer": "false"}, func(v float64) bool { return v >= 1 }},
	} {
		v, found := value(families, c.name, c.labels)
		require.True(t, found, "%s%v in rlmmd's scrape", c.name, c.labels)
		require.True(t, c.want(v), "%s%v = %v", c.name, c.labels, v)
	}
}

// kitExprs is every PromQL expression of the rules and the dashboard; a
// file that does not parse fails the test.
func kitExprs(t *testing.T) ([]rulefmt.Rule, []promnames.Expr) {
	t.Helper()
	rules, exprs, err := promnames.Rules(rulesFile)
	require.NoError(t, err, "the rules parse")
	dash, err := promnames.Dashboard(dashboardFile)
	require.NoError(t, err, "the dashboard parses")
	require.NotEmpty(t, dash)
	return rules, append(exprs, dash...)
}

// jmxNames are the series kafka-jmx-exporter.yml's rules write.
func jmxNames(t *testing.T) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(jmxFile)
	require.NoError(t, err)
	var cfg struct {
		Rules []struct {
			Name string `yaml:"name"`
		} `yaml:"rules"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &cfg))
	out := map[string]bool{}
	for _, r := range cfg.Rules {
		require.NotEmpty(t, r.Name)
		out[r.Name] = true
	}
	return out
}

// unknownNames lists, for each expression, the metrics it selects that are
// not exported: by rlmmd (exported), or, for the Kafka group, by the JMX
// exporter's rules (jmx). An expression that does not parse is listed too.
func unknownNames(exprs []promnames.Expr, exported, jmx map[string]bool) []string {
	var problems []string
	for _, e := range exprs {
		names, err := promnames.Names(e.PromQL)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %q does not parse: %v", e.Where, e.PromQL, err))
			continue
		}
		for _, n := range names {
			known := exported[n] || prometheusOwn[n]
			if e.Group == kafkaGroup {
				known = jmx[n]
			}
			if !known {
				problems = append(problems, fmt.Sprintf("%s: %s is not exported", e.Where, n))
			}
		}
	}
	return problems
}

// TestKitNamesWhatRlmmdExports: every metric the rules and the dashboard
// select is one a real rlmmd exports (the Kafka group's, one the JMX
// exporter's rules write), and every expression parses.
func TestKitNamesWhatRlmmdExports(t *testing.T) {
	t.Parallel()
	families := busyRlmmd(t)
	exported := seriesNames(families)
	_, exprs := kitExprs(t)
	problems := unknownNames(exprs, exported, jmxNames(t))
	require.Empty(t, problems, "rlmmd exports: %s", strings.Join(sortedKeys(exported), " "))
	requireBusy(t, families)

	// The check itself: a name rlmmd does not export, and an expression
	// that does not parse, are caught.
	bad := []promnames.Expr{
		{Where: "renamed", PromQL: `max(rlmm_stuck_segment) > 0`},
		{Where: "broken", PromQL: `sum(rate(rlmm_operation_errors_total[5m])`},
	}
	require.Len(t, unknownNames(bad, exported, nil), 2)
}

// TestRulesAreComplete: every alert has a for, a severity, a summary and a
// runbook_url; the runbook has a section per alert, which the link points
// to; and every alert the runbook describes is in the rules file.
func TestRulesAreComplete(t *testing.T) {
	t.Parallel()
	rules, _ := kitExprs(t)
	sections, err := promnames.Sections(runbookFile)
	require.NoError(t, err)
	// The runbook's alerts: the sections under "## Alerts".
	described := map[string]string{}
	in := false
	for _, s := range sections {
		if s.Level <= 2 {
			in = s.Title == "Alerts"
			continue
		}
		if in && s.Level == 3 {
			described[s.Title] = s.Anchor
		}
	}
	require.NotEmpty(t, described, "%s has a section ## Alerts with a ### section per alert", runbookFile)

	alerts := map[string]bool{}
	for _, r := range rules {
		if r.Alert == "" {
			continue
		}
		alerts[r.Alert] = true
		require.Positive(t, r.For, "%s: a for", r.Alert)
		require.Contains(t, []string{"critical", "warning"}, r.Labels["severity"], "%s: labels.severity", r.Alert)
		require.NotEmpty(t, r.Annotations["summary"], "%s: annotations.summary", r.Alert)
		anchor, ok := described[r.Alert]
		require.True(t, ok, "%s: no section ### %s under ## Alerts in %s", r.Alert, r.Alert, runbookFile)
		require.Equal(t, "https://github.com/krabka/remotestorage/blob/main/docs/RUNBOOK.md#"+anchor, r.Annotations["runbook_url"], "%s: runbook_url", r.Alert)
	}
	for name := range described {
		require.True(t, alerts[name], "%s describes the alert %s, which %s lacks", runbookFile, name, rulesFile)
	}
}

// TestPromtool: promtool checks the rules and runs their tests on series
// written by hand, then on series scraped from a real rlmmd.
func TestPromtool(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("promtool", "check", "rules", rulesFile).CombinedOutput()
	require.NoError(t, err, "promtool check rules:\n%s", out)
	out, err = exec.Command("promtool", "test", "rules", rulesTestFile).CombinedOutput()
	require.NoError(t, err, "promtool test rules %s:\n%s", rulesTestFile, out)
	require.Contains(t, string(out), "SUCCESS")

	// The scraped series, kept for 90 minutes as they are: the stuck
	// segment fires its alert with the labels rlmmd gives it; the purge's
	// timestamp, moved to the test's clock (which starts at 0), fires once
	// an hour and 15 minutes have passed without a purge; nothing else fires.
	families := busyRlmmd(t)
	requireBusy(t, families)
	rules, _ := kitExprs(t)
	dir := t.TempDir()
	rulesAbs := mustAbs(t, rulesFile)
	now := func() float64 {
		v, _ := value(families, "rlmm_purge_last_success_timestamp_seconds", nil)
		return v
	}()
	series := scrapedSeries(t, families, rules, map[string]float64{"rlmm_purge_last_success_timestamp_seconds": -now})
	byName := map[string]rulefmt.Rule{}
	for _, r := range rules {
		byName[r.Alert] = r
	}
	stuck := byName["RlmmSegmentsStuck"]
	purge := byName["RlmmPurgeBehind"]
	none := func(at, name string) map[string]any {
		return map[string]any{"eval_time": at, "alertname": name, "exp_alerts": []any{}}
	}
	test := map[string]any{
		"rule_files":          []string{rulesAbs},
		"evaluation_interval": "1m",
		"tests": []any{map[string]any{
			"interval":     "1m",
			"input_series": series,
			"alert_rule_test": []any{
				map[string]any{"eval_time": "20m", "alertname": "RlmmSegmentsStuck", "exp_alerts": []any{
					expectAlert(stuck, map[string]string{"state": "COPY_SEGMENT_STARTED"}, "1"),
				}},
				none("20m", "RlmmdDown"),
				none("20m", "RlmmdDatabaseUnreachable"),
				none("20m", "RlmmPartitionDeletesStuck"),
				none("20m", "RlmmCacheNotCaughtUp"),
				none("20m", "RlmmOperationErrors"),
				none("20m", "RlmmOperationLatency"),
				none("60m", "RlmmPurgeBehind"),
				map[string]any{"eval_time": "90m", "alertname": "RlmmPurgeBehind", "exp_alerts": []any{
					expectAlert(purge, map[string]string{"job": testJob}, ""),
				}},
			},
		}},
	}
	raw, err := json.Marshal(test) // JSON is YAML
	require.NoError(t, err)
	file := filepath.Join(dir, "scraped.test.yml")
	require.NoError(t, os.WriteFile(file, raw, 0o600))
	out, err = exec.Command("promtool", "test", "rules", file).CombinedOutput()
	require.NoError(t, err, "promtool test rules on the series scraped from rlmmd:\n%s", out)
}

// scrapedSeries writes, in promtool's notation, the series of families
// that rules select, as Prometheus would store them (job and instance
// added, up = 1), each held at its scraped value (plus shift[name]) for 90
// minutes.
func scrapedSeries(t *testing.T, families map[string]*dto.MetricFamily, rules []rulefmt.Rule, shift map[string]float64) []map[string]string {
	t.Helper()
	used := map[string]bool{}
	for _, r := range rules {
		names, err := promnames.Names(r.Expr)
		require.NoError(t, err)
		for _, n := range names {
			used[n] = true
		}
	}
	var out []map[string]string
	add := func(name string, labels []*dto.LabelPair, extra map[string]string, v float64) {
		if !used[name] {
			return
		}
		all := map[string]string{"job": testJob, "instance": testInstance}
		for _, l := range labels {
			all[l.GetName()] = l.GetValue()
		}
		for k, x := range extra {
			all[k] = x
		}
		var parts []string
		for _, k := range sortedKeys(all) {
			parts = append(parts, k+"="+strconv.Quote(all[k]))
		}
		v += shift[name]
		out = append(out, map[string]string{
			"series": name + "{" + strings.Join(parts, ",") + "}",
			"values": strconv.FormatFloat(v, 'f', -1, 64) + "+0x90",
		})
	}
	add("up", nil, nil, 1)
	for _, name := range sortedKeys(families) {
		f := families[name]
		for _, m := range f.GetMetric() {
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				add(name, m.GetLabel(), nil, m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				add(name, m.GetLabel(), nil, m.GetGauge().GetValue())
			case dto.MetricType_UNTYPED:
				add(name, m.GetLabel(), nil, m.GetUntyped().GetValue())
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					add(name+"_bucket", m.GetLabel(), map[string]string{"le": strconv.FormatFloat(b.GetUpperBound(), 'f', -1, 64)}, float64(b.GetCumulativeCount()))
				}
				add(name+"_bucket", m.GetLabel(), map[string]string{"le": "+Inf"}, float64(h.GetSampleCount()))
				add(name+"_sum", m.GetLabel(), nil, h.GetSampleSum())
				add(name+"_count", m.GetLabel(), nil, float64(h.GetSampleCount()))
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i]["series"] < out[j]["series"] })
	require.NotEmpty(t, out)
	return out
}

var templateRef = regexp.MustCompile(`\{\{ \$labels\.(\w+) \}\}|\{\{ \$value \}\}`)

// expectAlert is the alert promtool must see for r with labels, its
// annotations' templates filled in ($labels.NAME and $value only).
func expectAlert(r rulefmt.Rule, labels map[string]string, value string) map[string]any {
	all := map[string]string{}
	for k, v := range labels {
		all[k] = v
	}
	for k, v := range r.Labels {
		all[k] = v
	}
	ann := map[string]string{}
	for k, v := range r.Annotations {
		ann[k] = templateRef.ReplaceAllStringFunc(v, func(ref string) string {
			if m := templateRef.FindStringSubmatch(ref); m[1] != "" {
				return labels[m[1]]
			}
			return value
		})
	}
	return map[string]any{"exp_labels": all, "exp_annotations": ann}
}

// docMetrics are the metrics of docs/OPERATIONS.md's table under
// "Observability", each with the type the table gives it; a span such as
// `rlmm_pool_{idle,max}_connections` names each of its alternatives.
func docMetrics(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(repo + "/docs/OPERATIONS.md")
	require.NoError(t, err)
	doc := string(raw)
	start := strings.Index(doc, "\n## Observability")
	require.GreaterOrEqual(t, start, 0)
	end := strings.Index(doc[start+1:], "\n## ")
	require.Positive(t, end)
	span := regexp.MustCompile("`([a-z_]*)(?:\\{([a-z_,]+)\\})?([a-z_]*)`")
	out := map[string]string{}
	for _, line := range strings.Split(doc[start:start+1+end], "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`rlmm") {
			continue
		}
		kind := strings.TrimSpace(cells[2])
		for _, m := range span.FindAllStringSubmatch(cells[1], -1) {
			alts := []string{""}
			if m[2] != "" {
				alts = strings.Split(m[2], ",")
			}
			for _, a := range alts {
				out[m[1]+a+m[3]] = kind
			}
		}
	}
	require.NotEmpty(t, out, "docs/OPERATIONS.md's table of metrics")
	return out
}

// TestDocsNameWhatRlmmdExports: every metric docs/OPERATIONS.md's table
// names is one rlmmd exports, of the type the table says.
func TestDocsNameWhatRlmmdExports(t *testing.T) {
	t.Parallel()
	families := busyRlmmd(t)
	types := map[dto.MetricType]string{dto.MetricType_COUNTER: "counter", dto.MetricType_GAUGE: "gauge", dto.MetricType_HISTOGRAM: "histogram"}
	var problems []string
	for _, name := range sortedKeys(docMetrics(t)) {
		kind := docMetrics(t)[name]
		f, ok := families[name]
		switch {
		case !ok:
			problems = append(problems, name+" is not exported")
		case types[f.GetType()] != kind:
			problems = append(problems, fmt.Sprintf("%s is a %s, the table says %s", name, types[f.GetType()], kind))
		}
	}
	require.Empty(t, problems, "docs/OPERATIONS.md's table of metrics against rlmmd's scrape")
}
