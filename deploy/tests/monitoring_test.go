package tests

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

const (
	rulesFile     = "../monitoring/chute-rules.yaml"
	dashboardFile = "../monitoring/chute-dashboard.json"
)

// wantAlerts are the alerts operators rely on; renaming or dropping one
// breaks their routing.
var wantAlerts = []string{
	"ChuteDispatcherMissing", "ChuteQueueGrowing", "ChuteDeadLetters",
	"ChuteInsertConfigErrors", "ChuteInsertTransientErrors", "ChuteInsertDataErrors",
	"ChuteMemberFailed", "ChuteQueueBackPressure", "ChuteQueuePutsRefused",
}

// scrapeLabels are added by Prometheus when it scrapes; a node's
// /metrics never has them.
var scrapeLabels = []string{"job", "instance"}

func promQL() parser.Parser { return parser.NewParser(parser.Options{}) }

// loadRules parses data as a Prometheus rule file and fails on any error.
func loadRules(t testing.TB, name string, data []byte) *rulefmt.RuleGroups {
	t.Helper()
	groups, errs := rulefmt.Parse(data, false, model.LegacyValidation, promQL(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, err := range errs {
		t.Errorf("%s: %v", name, err)
	}
	if groups == nil || len(groups.Groups) == 0 {
		t.Fatalf("%s: no rule groups", name)
	}
	return groups
}

func TestRules_parse(t *testing.T) {
	groups := loadRules(t, rulesFile, readFile(t, rulesFile))
	var alerts []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: a recording rule %q: the file holds alerts only", g.Name, r.Record)
				continue
			}
			alerts = append(alerts, r.Alert)
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("alert %s: severity %q, want warning or critical", r.Alert, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s: want a summary and a description", r.Alert)
			}
			if _, err := promQL().ParseExpr(r.Expr); err != nil {
				t.Errorf("alert %s: %v", r.Alert, err)
			}
		}
	}
	for _, a := range wantAlerts {
		if !slices.Contains(alerts, a) {
			t.Errorf("%s: no alert %s", rulesFile, a)
		}
	}
}

// TestRules_rejectsBrokenExpr: the parser the checks rely on refuses a
// rule file with a broken expression.
func TestRules_rejectsBrokenExpr(t *testing.T) {
	broken := []byte("groups:\n  - name: x\n    rules:\n      - alert: X\n        expr: sum by (job (up)\n")
	_, errs := rulefmt.Parse(broken, false, model.LegacyValidation, promQL(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if len(errs) == 0 {
		t.Fatal("rulefmt.Parse accepted a broken expression")
	}
}

// dashboard is the part of a Grafana dashboard the checks read.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Datasource *datasource     `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	GridPos    struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		Expr       string      `json:"expr"`
		RefID      string      `json:"refId"`
		Datasource *datasource `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

func loadDashboard(t testing.TB) dashboard {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal(readFile(t, dashboardFile), &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.UID == "" || d.Title == "" || len(d.Panels) == 0 {
		t.Fatalf("%s: want a uid, a title and panels", dashboardFile)
	}
	return d
}

// grafanaVar matches Grafana's variables in a query: $name, ${name} and
// ${name:format}.
var grafanaVar = regexp.MustCompile(`\$\{?(\w+)(?::\w+)?\}?`)

// fillVariables replaces Grafana's variables as Grafana would before it
// sends the query: intervals by a duration, the others by a regular
// expression that matches everything.
func fillVariables(expr string) string {
	return grafanaVar.ReplaceAllStringFunc(expr, func(m string) string {
		name := grafanaVar.FindStringSubmatch(m)[1]
		if strings.HasPrefix(name, "__") && strings.Contains(name, "interval") {
			return "5m"
		}
		return ".*"
	})
}

// labelValues matches a template variable's label_values(metric, label).
var labelValues = regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$`)

// dashboardQueries returns every PromQL query of the dashboard (variables
// filled in) by where it is, and fails on panels that query nothing or a
// data source other than the dashboard's variable.
func dashboardQueries(t testing.TB, d dashboard) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" || p.Type == "text" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q: no queries", p.Title)
			}
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: data source %v, want the variable ${datasource}", p.Title, p.Datasource)
			}
			for _, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("panel %q: query %s is empty", p.Title, tg.RefID)
					continue
				}
				out["panel "+p.Title+" "+tg.RefID] = fillVariables(tg.Expr)
			}
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
				t.Errorf("variable %s: query: %v", v.Name, err)
				continue
			}
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			t.Errorf("variable %s: query %q, want label_values(metric, label)", v.Name, q.Query)
			continue
		}
		// The metric with the label as a matcher: it must exist with it.
		out["variable "+v.Name] = m[1] + `{` + m[2] + `!=""}`
	}
	return out
}

func TestDashboard_queriesParse(t *testing.T) {
	queries := dashboardQueries(t, loadDashboard(t))
	if len(queries) < 10 {
		t.Fatalf("%s: only %d queries", dashboardFile, len(queries))
	}
	for where, q := range queries {
		if strings.Contains(q, "$") {
			t.Errorf("%s: %q: a variable is left", where, q)
		}
		if _, err := promQL().ParseExpr(q); err != nil {
			t.Errorf("%s: %q: %v", where, q, err)
		}
	}
}

func TestDashboard_layout(t *testing.T) {
	d := loadDashboard(t)
	ids := map[int]string{}
	type cell struct{ x, y int }
	taken := map[cell]string{}
	var walk func(ps []panel, collapsed bool)
	walk = func(ps []panel, collapsed bool) {
		for _, p := range ps {
			if prev, dup := ids[p.ID]; dup || p.ID == 0 {
				t.Errorf("panel %q: id %d, already %q (ids are unique and not 0)", p.Title, p.ID, prev)
			}
			ids[p.ID] = p.Title
			g := p.GridPos
			if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
				t.Errorf("panel %q: gridPos %+v outside the 24 columns", p.Title, g)
			}
			if !collapsed {
				for x := g.X; x < g.X+g.W && x < 24; x++ {
					for y := g.Y; y < g.Y+g.H && g.H < 100; y++ {
						if other, ok := taken[cell{x, y}]; ok {
							t.Errorf("panel %q overlaps %q at (%d, %d)", p.Title, other, x, y)
							return
						}
						taken[cell{x, y}] = p.Title
					}
				}
			}
			walk(p.Panels, true)
		}
	}
	walk(d.Panels, false)
}

// usage is what the dashboard and the rules ask of a node's /metrics.
type usage struct {
	// labels maps each metric name selected to the labels its matchers
	// name (job and instance, which Prometheus adds, left out).
	labels map[string][]string
	// groupings are the labels aggregations group by: each must be on one
	// of the metrics inside the aggregation.
	groupings []grouping
}

type grouping struct {
	where   string
	label   string
	metrics []string
}

// usedMetrics walks every query of the dashboard and the rules.
func usedMetrics(t testing.TB) usage {
	t.Helper()
	exprs := dashboardQueries(t, loadDashboard(t))
	for _, g := range loadRules(t, rulesFile, readFile(t, rulesFile)).Groups {
		for _, r := range g.Rules {
			exprs["alert "+r.Alert] = r.Expr
		}
	}
	u := usage{labels: map[string][]string{}}
	for where, q := range exprs {
		expr, err := promQL().ParseExpr(q)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			switch n := n.(type) {
			case *parser.VectorSelector:
				name := selectorName(n)
				if name == "" {
					t.Errorf("%s: a selector without a metric name", where)
					return nil
				}
				ls := u.labels[name]
				for _, m := range n.LabelMatchers {
					if m.Name != model.MetricNameLabel && !slices.Contains(scrapeLabels, m.Name) && !slices.Contains(ls, m.Name) {
						ls = append(ls, m.Name)
					}
				}
				sort.Strings(ls)
				u.labels[name] = ls
			case *parser.AggregateExpr:
				if n.Without {
					return nil
				}
				var inside []string
				parser.Inspect(n.Expr, func(c parser.Node, _ []parser.Node) error {
					if vs, ok := c.(*parser.VectorSelector); ok {
						inside = append(inside, selectorName(vs))
					}
					return nil
				})
				for _, l := range n.Grouping {
					if !slices.Contains(scrapeLabels, l) {
						u.groupings = append(u.groupings, grouping{where: where, label: l, metrics: inside})
					}
				}
			}
			return nil
		})
	}
	return u
}

// selectorName returns the metric name a selector selects.
func selectorName(vs *parser.VectorSelector) string {
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel {
			return m.Value
		}
	}
	return vs.Name
}

func TestUsedMetrics_found(t *testing.T) {
	used := usedMetrics(t)
	for _, want := range []string{"chute_queue_puts_total", "chute_clickhouse_dead_letters_total", "chute_gossip_members", "process_resident_memory_bytes"} {
		if _, ok := used.labels[want]; !ok {
			t.Errorf("the dashboard and the rules use no %s: the walk of the queries misses selectors", want)
		}
	}
	if len(used.groupings) == 0 {
		t.Error("no grouping labels found: the walk of the queries misses aggregations")
	}
}

func readFile(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.FromSlash(rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
