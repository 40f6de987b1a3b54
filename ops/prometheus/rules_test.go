// Package prometheus_test checks the Prometheus configuration shipped in
// ops/prometheus: promtool's own checks and rule tests, and that every
// metric a rule, a rule test or a panel of the Grafana dashboard
// (ops/grafana/payguard.json) names is one a real worker exports.
package prometheus_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.yaml.in/yaml/v3"

	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/starter/cli"
	wm "github.com/payguard/payguard/worker/metrics"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// prometheusOwn are series Prometheus writes itself for every target.
var prometheusOwn = []string{"up"}

// scrapeLabels are the labels a scrape adds to every series.
var scrapeLabels = []string{"job", "instance"}

func promtool(t *testing.T, args ...string) {
	t.Helper()
	testenv.NeedsServices(t, "promtool (make promtool)")
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found: `make promtool` installs it (Debian: apt-get install prometheus)")
	}
	out, err := exec.Command(path, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func TestPromtoolChecksConfigAndRules(t *testing.T) {
	promtool(t, "check", "config", "prometheus.yml")
	promtool(t, "check", "config", composeConfig)
	promtool(t, "test", "rules", "alerts_test.yml")
}

// composeConfig is the configuration docker-compose.yml's Prometheus reads.
const composeConfig = "prometheus.compose.yml"

// The compose configuration is prometheus.yml with the compose worker's
// address for the default one, and nothing else changed; that address is
// the worker service's and port its --http-addr's.
func TestComposeConfigIsTheRepositorysWithTheComposeWorker(t *testing.T) {
	var local, compose map[string]any
	readYAML(t, "prometheus.yml", &local)
	readYAML(t, composeConfig, &compose)
	targets := func(cfg map[string]any) []any {
		return cfg["scrape_configs"].([]any)[0].(map[string]any)["static_configs"].([]any)[0].(map[string]any)["targets"].([]any)
	}
	var dc struct {
		Services map[string]struct {
			Command     []string          `yaml:"command"`
			Environment map[string]string `yaml:"environment"`
			Volumes     []string          `yaml:"volumes"`
		} `yaml:"services"`
	}
	readYAML(t, "../../docker-compose.yml", &dc)
	// Compose gives the worker its settings as environment (PAYGUARD_<FLAG>).
	addr := dc.Services["worker"].Environment[config.EnvName("http-addr")]
	if addr == "" {
		t.Fatalf("the compose worker's environment names no %s", config.EnvName("http-addr"))
	}
	_, port, _ := strings.Cut(addr, ":")
	if got := targets(compose); !slices.Equal(got, []any{"worker:" + port}) {
		t.Errorf("%s scrapes %v, want the compose worker worker:%s", composeConfig, got, port)
	}
	targets(compose)[0] = config.DefaultWorkerAddr
	if !reflect.DeepEqual(local, compose) {
		t.Errorf("%s differs from prometheus.yml in more than the target:\n%v\n%v", composeConfig, compose, local)
	}
	prom := dc.Services["prometheus"]
	if !slices.Contains(prom.Volumes, "./ops/prometheus:/etc/prometheus:ro") || !slices.Contains(prom.Command, "--config.file=/etc/prometheus/"+composeConfig) {
		t.Errorf("compose's Prometheus does not read %s beside the rules: %v %v", composeConfig, prom.Volumes, prom.Command)
	}
}

// The scrape target is the worker's default address, owned by config.
func TestScrapeTargetIsTheWorkersDefaultAddress(t *testing.T) {
	var cfg struct {
		ScrapeConfigs []struct {
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, "prometheus.yml", &cfg)
	if len(cfg.ScrapeConfigs) != 1 || len(cfg.ScrapeConfigs[0].StaticConfigs) != 1 ||
		!slices.Equal(cfg.ScrapeConfigs[0].StaticConfigs[0].Targets, []string{config.DefaultWorkerAddr}) {
		t.Fatalf("scrape targets %+v, want the worker's default %s", cfg.ScrapeConfigs, config.DefaultWorkerAddr)
	}
}

// Every metric (and label) a rule, a rule test or a dashboard panel names
// is exported by a real worker, scraped after it has confirmed an order
// through a callback, refused a forged one and failed a workflow task, so
// every series they read exists.
func TestRulesAndDashboardNameOnlyExportedMetrics(t *testing.T) {
	testenv.NeedsServices(t, "PostgreSQL and the Temporal dev server")
	f := testenv.QuietFaults()
	// Decided after the first lookup (FastConfig polls at 500 ms), so the
	// order also runs a lookup, an activity rather than a local one.
	f.Processing = simulator.Processing{Min: simulator.Duration(1500 * time.Millisecond), Max: simulator.Duration(1500 * time.Millisecond), SuccessRate: 1}
	s := testenv.NewStack(t, f, nil)
	if _, err := s.Store.SetStock(context.Background(), "P1", 5); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) {
		var out strings.Builder
		if err := cli.Run(context.Background(), args, cli.Env{Getenv: s.Getenv, Stdout: &out, Stderr: &out}); err != nil {
			t.Fatalf("starter %v: %v\n%s", args, err, out.String())
		}
	}
	run("order", "--product", "P1", "--qty", "1", "--amount", "500", "--order-id", "alerts-0001", "--wait")
	body := []byte(`{"transactionKey":"k","orderId":"alerts-0001","amount":500,"status":"SUCCESS"}`)
	code, _, err := cli.PostCallback(context.Background(), s.Config.CallbackURL, []byte("not-the-secret"), body, time.Now())
	if err != nil || code != 401 {
		t.Fatalf("forged callback: %d %v, want 401", code, err)
	}
	// A workflow task that fails: a run of a type the worker does not
	// register, on its task queue. The SDK counts it only once it happens.
	tc := testenv.Temporal(t)
	wf, err := tc.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: testenv.ID("no-such-workflow"), TaskQueue: s.TaskQueue},
		"NoSuchWorkflow")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tc.TerminateWorkflow(context.Background(), wf.GetID(), wf.GetRunID(), "test over") })
	// The pinned-run counts are read from Temporal in the background.
	testenv.Eventually(t, 30*time.Second, func() bool {
		names := scrapeNames(t, s.MetricsURL())
		_, failures := names[workflowTaskFailures]
		_, pinned := names[wm.PinnedRunsOpen]
		return failures && pinned
	}, workflowTaskFailures+" and "+wm.PinnedRunsOpen+" on /metrics")
	exported := scrapeNames(t, s.MetricsURL())

	sels := append(ruleSelectors(t), dashboardSelectors(t)...)
	for _, sel := range sels {
		labels, ok := exported[sel.name]
		switch {
		case slices.Contains(prometheusOwn, sel.name):
			continue
		case !ok:
			t.Errorf("%s names %s, which the worker does not export", sel.where, sel.name)
			continue
		}
		for _, l := range sel.labels {
			if !labels[l] && !slices.Contains(scrapeLabels, l) {
				t.Errorf("%s: %s has no label %q (it has %v)", sel.where, sel.name, l, labels)
			}
		}
	}
}

// workflowTaskFailures is the SDK's counter of failed workflow tasks as
// the worker exports it.
const workflowTaskFailures = "temporal_workflow_task_execution_failed_total"

// dashboardSelectors reads every metric selector in the dashboard's
// panel queries.
func dashboardSelectors(t *testing.T) []selector {
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	var out []selector
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, sel := range selectorsIn(tg.Expr) {
				sel.where = "dashboard panel " + p.Title
				out = append(out, sel)
			}
		}
	}
	if len(out) < 10 {
		t.Fatalf("found only %d selectors in the dashboard: the reader is broken", len(out))
	}
	return out
}

// dashboardPath is the Grafana dashboard docker-compose.yml provisions.
const dashboardPath = "../grafana/payguard.json"

// The dashboard shows what issue 32 asks of it, each panel by a metric of
// its own.
func TestDashboardShowsWhatAnOnCallNeeds(t *testing.T) {
	names := map[string]bool{}
	for _, sel := range dashboardSelectors(t) {
		names[sel.name] = true
	}
	for _, want := range []string{
		wm.Orders, wm.LostOrders, wm.BreakerCurrentState, wm.GatewayCalls, wm.LookupDuration + "_bucket", wm.ReconcileFindings,
		"temporal_workflow_task_execution_latency_seconds_bucket", "temporal_activity_execution_latency_seconds_bucket",
		workflowTaskFailures, wm.BuildInfo,
	} {
		if !names[want] {
			t.Errorf("the dashboard shows no %s", want)
		}
	}
}

func TestSelectorsIn(t *testing.T) {
	got := selectorsIn(`(sum by (instance) (rate(payguard_gateway_calls_total{endpoint="create",outcome=~"unknown|x"}[5m])) > 0.05
		and on (instance) up{job="a b"} == 0) or payguard_breaker_state offset 5m > bool 1`)
	want := []selector{{name: "payguard_gateway_calls_total", labels: []string{"endpoint", "outcome"}},
		{name: "up", labels: []string{"job"}}, {name: "payguard_breaker_state"}}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].name != want[i].name || !slices.Equal(got[i].labels, want[i].labels) {
			t.Errorf("selector %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

type selector struct {
	where  string // the rule or rule test it came from
	name   string
	labels []string
}

// ruleSelectors reads every metric selector in alerts.yml's expressions
// and alerts_test.yml's input series.
func ruleSelectors(t *testing.T) []selector {
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	readYAML(t, "alerts.yml", &rules)
	var tests struct {
		Tests []struct {
			Name   string `yaml:"name"`
			Series []struct {
				Series string `yaml:"series"`
			} `yaml:"input_series"`
		} `yaml:"tests"`
	}
	readYAML(t, "alerts_test.yml", &tests)
	var out []selector
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			for _, sel := range selectorsIn(r.Expr) {
				sel.where = "rule " + r.Alert
				out = append(out, sel)
			}
		}
	}
	for _, tc := range tests.Tests {
		for _, in := range tc.Series {
			for _, sel := range selectorsIn(in.Series) {
				sel.where = "rule test " + tc.Name
				out = append(out, sel)
			}
		}
	}
	if len(out) < 10 {
		t.Fatalf("found only %d selectors: the reader is broken", len(out))
	}
	return out
}

var (
	// A name, then maybe {matchers}; a name followed by "(" is a function.
	selectorRe = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?\s*(\()?`)
	matcherRe  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
	// What PromQL writes that is not a metric: grouping lists, ranges,
	// offsets, strings, numbers, keywords.
	notMetricRe = regexp.MustCompile(`(?:\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\))|\[[^\]]*\]|"[^"]*"|\b\d+(?:\.\d+)?(?:ms|[smhdwy])?\b`)
	keywords    = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right"}
)

// selectorsIn finds the metric selectors in a PromQL expression (or a
// promtool series). It is a reader for the expressions this directory
// writes, not a PromQL parser: promtool has already parsed them.
func selectorsIn(expr string) []selector {
	var out []selector
	// Matchers first, before strings are blanked out of the expression.
	expr = notMetricRe.ReplaceAllStringFunc(expr, func(m string) string {
		if strings.HasPrefix(m, `"`) {
			return `""`
		}
		return " "
	})
	for _, m := range selectorRe.FindAllStringSubmatch(expr, -1) {
		if m[3] == "(" || slices.Contains(keywords, m[1]) {
			continue
		}
		sel := selector{name: m[1]}
		for _, lm := range matcherRe.FindAllStringSubmatch(m[2], -1) {
			sel.labels = append(sel.labels, lm[1])
		}
		out = append(out, sel)
	}
	return out
}

// scrapeNames reads the worker's /metrics: each exported metric name (a
// histogram's _bucket, _sum and _count too) with its labels.
func scrapeNames(t *testing.T, url string) map[string]map[string]bool {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sels := selectorsIn(line[:strings.LastIndexByte(line, ' ')])
		if len(sels) == 0 {
			continue
		}
		if out[sels[0].name] == nil {
			out[sels[0].name] = map[string]bool{}
		}
		for _, l := range sels[0].labels {
			out[sels[0].name][l] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
