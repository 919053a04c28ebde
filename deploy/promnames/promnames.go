// Package promnames reads the operators' kit's Prometheus rules, Grafana
// dashboard and runbook, and names the metrics each expression selects,
// parsing PromQL with Prometheus's own parser. It lives in the module of
// deploy/ (deploy/go.mod), which keeps the Prometheus server's dependencies
// out of the library's.
package promnames

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

var promql = parser.NewParser(parser.Options{})

// Expr is one PromQL expression of the kit and where it is.
type Expr struct {
	Where  string // "rlmm-alerts.yml: RlmmdDown", "rlmm-dashboard.json: Latency p99 (A)"
	Group  string // the rule group; "" for the dashboard
	PromQL string
}

// Names returns the metric names e selects, sorted. A selector without a
// literal name (a regular expression on __name__) is an error: nothing
// could check it.
func Names(e string) ([]string, error) {
	node, err := promql.ParseExpr(e)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	var bad error
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		if name == "" {
			for _, m := range vs.LabelMatchers {
				if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
					name = m.Value
				}
			}
		}
		if name == "" {
			bad = fmt.Errorf("selector %s names no metric", vs)
			return nil
		}
		set[name] = true
		return nil
	})
	if bad != nil {
		return nil, bad
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// Rules reads a rules file as Prometheus does (each expression parsed, the
// fields checked) and returns its rules.
func Rules(path string) ([]rulefmt.Rule, []Expr, error) {
	groups, errs := rulefmt.ParseFile(path, false, model.UTF8Validation, promql, nil)
	if len(errs) > 0 {
		return nil, nil, fmt.Errorf("%s: %w", path, errors.Join(errs...))
	}
	var rules []rulefmt.Rule
	var exprs []Expr
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			rules = append(rules, r)
			name := r.Alert
			if name == "" {
				name = r.Record
			}
			exprs = append(exprs, Expr{Where: fmt.Sprintf("%s: %s", path, name), Group: g.Name, PromQL: r.Expr})
		}
	}
	return rules, exprs, nil
}

// grafanaVar matches the dashboard's variables: Grafana's own ($__rate_interval,
// $__interval, …) and the dashboard's ($instance, ${datasource}).
var (
	grafanaInterval = regexp.MustCompile(`\$__(rate_)?interval\b|\$\{__(rate_)?interval\}`)
	grafanaVar      = regexp.MustCompile(`\$\{?[A-Za-z_][A-Za-z0-9_]*\}?`)
	labelValues     = regexp.MustCompile(`^label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\)$`)
)

// grafanaExpr is what Prometheus receives for a dashboard's expression: its
// interval variables as a duration, the others as a plain value.
func grafanaExpr(e string) string {
	e = grafanaInterval.ReplaceAllString(e, "5m")
	return grafanaVar.ReplaceAllString(e, "x")
}

// Dashboard returns the PromQL of every panel's target and of every query
// variable (label_values(SELECTOR, label): its selector) of a Grafana
// dashboard, with the variables replaced as Grafana would.
func Dashboard(path string) ([]Expr, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []Expr
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				if t.Expr == "" {
					continue
				}
				out = append(out, Expr{Where: fmt.Sprintf("%s: %s (%s)", path, p.Title, t.RefID), PromQL: grafanaExpr(t.Expr)})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			if err := json.Unmarshal(v.Query, &q.Query); err != nil {
				return nil, fmt.Errorf("%s: variable %s: %w", path, v.Name, err)
			}
		}
		m := labelValues.FindStringSubmatch(strings.TrimSpace(q.Query))
		if m == nil {
			return nil, fmt.Errorf("%s: variable %s: want label_values(SELECTOR, label), got %q", path, v.Name, q.Query)
		}
		out = append(out, Expr{Where: fmt.Sprintf("%s: variable %s", path, v.Name), PromQL: grafanaExpr(m[1])})
	}
	return out, nil
}

type panel struct {
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

// Section is a heading of a Markdown file and its GitHub anchor.
type Section struct {
	Level  int
	Title  string
	Anchor string
}

// Sections returns the headings of a Markdown file (outside code blocks).
func Sections(path string) ([]Section, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Section
	fenced := false
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		level := len(line) - len(strings.TrimLeft(line, "#"))
		title := strings.TrimSpace(line[level:])
		out = append(out, Section{Level: level, Title: title, Anchor: Anchor(title)})
	}
	return out, nil
}

// Anchor is the anchor GitHub gives a heading: lower case, punctuation
// dropped, spaces as hyphens.
func Anchor(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}
