package harness

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/payguard/payguard/internal/temporalserver"
	"github.com/payguard/payguard/loadgen"
)

// Report is one bench run: bench-out/report.json.
type Report struct {
	Label      string   `json:"label,omitempty"`
	Quick      bool     `json:"quick"`
	Machine    Machine  `json:"machine"`
	WorkerArgs []string `json:"workerArgs,omitempty"`
	Eager      bool     `json:"eager"`
	// Temporal is which Temporal the run measured (dev or server).
	Temporal temporalserver.Kind `json:"temporal"`
	// Workers is how many worker processes served payguard's orders.
	Workers int `json:"workers"`
	// QuietWaitSec is how long the bench waited for the dev server to go
	// quiet after the baseline, before payguard's steps (quiet.go).
	QuietWaitSec float64 `json:"quietWaitSeconds"`
	// Restarts counts the dev server's restarts before a timed phase that
	// followed a step not sustained (run.go).
	Restarts int `json:"devServerRestarts"`
	// MinimalSteps and NoopSteps are the baselines' steps (baselines.go),
	// climbed by the same rule as payguard's Steps.
	MinimalSteps []Step `json:"minimalSteps,omitempty"`
	NoopSteps    []Step `json:"noopSteps,omitempty"`
	Steps        []Step `json:"steps,omitempty"`
	// MinimalPerSecond and BaselinePerSecond are the baselines' highest
	// sustained workflows/s: the minimal and the no-op workflow's.
	MinimalPerSecond  float64 `json:"minimalWorkflowsPerSecond"`
	BaselinePerSecond float64 `json:"baselineWorkflowsPerSecond"`
	Sustained         float64 `json:"sustainedOrdersPerSecond"` // the highest sustained step's confirmed/s
	// SustainedP99 is that step's p99 time to CONFIRMED (target ≤ 1 s).
	SustainedP99 float64 `json:"sustainedP99Millis"`
	// RatioToMinimal is the headline: Sustained / MinimalPerSecond, the
	// share of the limit payguard reaches (target ≥ 0.6); Ratio is the same
	// against the no-op workflow.
	RatioToMinimal float64 `json:"ratioToMinimal"`
	Ratio          float64 `json:"ratioToBaseline"`
	// TemporalCPURatio is the minimal workflow's CPU on Temporal's side
	// (CPUCost.Temporal) over payguard's, each at its sustained step: the
	// share of the limit payguard would reach on a server of its own, its
	// workers, database and gateway elsewhere, as in production. Not the
	// headline: on the bench's machine everything shares the cores.
	TemporalCPURatio float64 `json:"temporalCpuRatio,omitempty"`
	// APISteps are the same steps with every order placed through the
	// HTTP order API (the api phase); APISustained their highest
	// sustained confirmed/s, APIRatio that over Sustained (target ≥ 0.9).
	APISteps     []Step  `json:"apiSteps,omitempty"`
	APISustained float64 `json:"apiSustainedOrdersPerSecond,omitempty"`
	APIRatio     float64 `json:"ratioApiToDirect,omitempty"`
	// Histories are one completed workflow's history per ladder: where
	// payguard's server work goes beside the baselines'.
	Histories []History      `json:"histories,omitempty"`
	Breaker   *BreakerResult `json:"breaker,omitempty"`
	Capacity  *Capacity      `json:"capacity,omitempty"`
	// Outcomes sums the steps' (Step.Outcomes); Lost is its lost orders.
	Outcomes loadgen.Outcomes `json:"outcomes"`
	Lost     int              `json:"lostOrders"`
}

// Machine says what the numbers were measured on, and how busy it was.
type Machine struct {
	CPUs       int    `json:"cpus"`
	Model      string `json:"cpuModel"`
	GoVersion  string `json:"goVersion"`
	LoadBefore string `json:"loadAverageBefore"`
	LoadAfter  string `json:"loadAverageAfter"`
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), LoadBefore: loadAverage()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.Model = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// loadAverage is /proc/loadavg's 1, 5 and 15 minute figures.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// The bars, measured, never asserted: the API's share of the
// direct rate, payguard's share of the minimal workflow's, and the p99 of
// a confirmed order at the sustained rate.
const (
	apiRatioTarget     = 0.9
	minimalRatioTarget = 0.6
	p99Target          = time.Second
)

// highestSustained is the highest sustained step's confirmed/s, and that
// step's p99 time to final status.
func highestSustained(steps []Step) (rate, p99 float64) {
	s, _ := sustainedStep(steps)
	return s.Throughput, s.Latency.P99
}

// sustainedStep is the step of the highest sustained throughput.
func sustainedStep(steps []Step) (best Step, ok bool) {
	for _, s := range steps {
		if s.Sustained && s.Throughput > best.Throughput {
			best, ok = s, true
		}
	}
	return best, ok
}

// stepsOf is where a ladder's steps go in the report.
func (r *Report) stepsOf(ladder string) *[]Step {
	switch ladder {
	case minimalLadder:
		return &r.MinimalSteps
	case noopLadder:
		return &r.NoopSteps
	case apiLadder:
		return &r.APISteps
	}
	return &r.Steps
}

// ratio is a over b to two places, 0 without b.
func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return round2(a / b)
}

// summarise takes the highest sustained steps and the ratios.
func (r *Report) summarise() {
	r.Sustained, r.SustainedP99 = highestSustained(r.Steps)
	r.APISustained, _ = highestSustained(r.APISteps)
	r.MinimalPerSecond, _ = highestSustained(r.MinimalSteps)
	r.BaselinePerSecond, _ = highestSustained(r.NoopSteps)
	r.APIRatio = 0
	if len(r.APISteps) > 0 {
		r.APIRatio = ratio(r.APISustained, r.Sustained)
	}
	r.RatioToMinimal = ratio(r.Sustained, r.MinimalPerSecond)
	r.TemporalCPURatio = 0
	if p, ok := sustainedStep(r.Steps); ok {
		if m, ok := sustainedStep(r.MinimalSteps); ok {
			r.TemporalCPURatio = ratio(m.CPU.Temporal(), p.CPU.Temporal())
		}
	}
	r.Ratio = ratio(r.Sustained, r.BaselinePerSecond)
}

// Table is the run for the terminal and the README.
func (r Report) Table() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "\n  payguard bench%s — %d CPUs (%s), load average %s before, %s after\n\n", labelled(r.Label), r.Machine.CPUs,
		r.Machine.Model, r.Machine.LoadBefore, r.Machine.LoadAfter)
	fmt.Fprintf(w, "  measure\tvalue\tdetail\n")
	steps := func(name string, steps []Step) {
		for _, s := range steps {
			fmt.Fprintf(w, "  %s at %g/s offered\t%.1f confirmed/s\tp50 %.0f ms, p95 %.0f ms, p99 %.0f ms, first answer p50 %.0f ms, %d lost, %s; CPU per order: %s\n",
				name, s.Offered, s.Throughput, s.Latency.P50, s.Latency.P95, s.Latency.P99, s.FirstAnswer.P50, s.Outcomes.Lost, verdict(s), s.CPU)
		}
	}
	steps(minimalLadder, r.MinimalSteps)
	steps(noopLadder, r.NoopSteps)
	steps(payguardLadder, r.Steps)
	steps(apiLadder, r.APISteps)
	restarts := ""
	if r.Restarts > 0 {
		restarts = fmt.Sprintf("; %s restarted %d× after steps not sustained", r.Temporal.Server(), r.Restarts)
	}
	if len(r.MinimalSteps) > 0 {
		fmt.Fprintf(w, "  minimal workflow sustained (the limit)\t%.1f workflows/s\tlocal activity, one signal, local activity\n", r.MinimalPerSecond)
	}
	if len(r.NoopSteps) > 0 {
		fmt.Fprintf(w, "  no-op workflow sustained\t%.1f workflows/s\t%d activities that do nothing\n", r.BaselinePerSecond, happyPathActivities)
	}
	if len(r.Steps) > 0 {
		fmt.Fprintf(w, "  payguard sustained\t%.1f orders/s\tevery order CONFIRMED, p99 < %s; p99 %.0f ms at that rate (target ≤ %s)%s\n",
			r.Sustained, sustainP99, r.SustainedP99, p99Target, restarts)
	}
	if len(r.APISteps) > 0 {
		fmt.Fprintf(w, "  payguard via API sustained\t%.1f orders/s\tthe same steps and rule, each order a POST /api/v1/orders\n", r.APISustained)
		if len(r.Steps) > 0 {
			fmt.Fprintf(w, "  ratio API / direct\t%.2f×\tagainst payguard sustained %.1f orders/s (the starter's load path); target ≥ %.1f×\n",
				r.APIRatio, r.Sustained, apiRatioTarget)
		}
	}
	if len(r.Steps)+len(r.APISteps) > 0 {
		fmt.Fprintf(w, "  lost orders, every step (database)\t%s\tplaced -> final status %s\n", r.Outcomes.LostLine(), r.Outcomes.LatencyLine())
	}
	if len(r.Steps) > 0 && len(r.MinimalSteps) > 0 {
		fmt.Fprintf(w, "  ratio payguard / minimal (headline)\t%.2f×\tof the limit, %.1f workflows/s; target ≥ %.1f×\n", r.RatioToMinimal, r.MinimalPerSecond, minimalRatioTarget)
	}
	if r.TemporalCPURatio > 0 {
		p, _ := sustainedStep(r.Steps)
		m, _ := sustainedStep(r.MinimalSteps)
		fmt.Fprintf(w, "  ratio on Temporal's side (CPU)\t%.2f×\tCPU per order at the sustained rates: Temporal %.1f ms (minimal %.1f ms), payguard's own %.1f ms (worker, its database, pgsim)\n",
			r.TemporalCPURatio, p.CPU.Temporal(), m.CPU.Temporal(), p.CPU.Payguards())
	}
	if len(r.Steps) > 0 && len(r.NoopSteps) > 0 {
		fmt.Fprintf(w, "  ratio payguard / no-op\t%.2f×\tagainst %.1f workflows/s\n", r.Ratio, r.BaselinePerSecond)
	}
	for _, h := range r.Histories {
		fmt.Fprintf(w, "  server work of one %s workflow\t%d events\t%d bytes, %d visibility writes; %s\n", h.Of, h.Events, h.Bytes, h.VisibilityWrites, h.typesLine())
	}
	if c := r.Capacity; c != nil {
		fmt.Fprintf(w, "  %d waiting orders (of %d): worker RSS\t%.1f MB per 1000\t%.0f → %.0f MB (target 10 000 ≤ 150 MB)\n",
			c.Waiting, c.Orders, c.RSSPer1000MB, c.Before.RSSMB, c.After.RSSMB)
		fmt.Fprintf(w, "  %d waiting orders: Go heap\t%.1f MB per 1000\t%.0f → %.0f MB after a forced GC\n", c.Waiting, c.HeapPer1000MB, c.Before.HeapMB, c.After.HeapMB)
		fmt.Fprintf(w, "  history per order\t%d bytes waiting\t%d events; a CONFIRMED one %d bytes, %d events\n",
			c.HistoryBytes, c.HistoryEvents, c.ConfirmedBytes, c.ConfirmedEvents)
	}
	if br := r.Breaker; br != nil {
		fmt.Fprintf(w, "  open-breaker lookup (activity, in process)\tp50 %.1f µs, p99 %.1f µs\ttarget p99 ≤ 1 ms\n", br.OpenLookup.P50, br.OpenLookup.P99)
		for _, t := range br.Trips {
			v := fmt.Sprintf("%.2f s", t.ToOpenSec)
			if t.ToOpenSec < 0 {
				v = "not OPEN"
			}
			fmt.Fprintf(w, "  gateway down → OPEN at %g lookups/s\t%s\t%d lookups while down (target ≤ 1 s at ≥ 3/s)\n", t.LookupsPerSec, v, t.Lookups)
		}
	}
	w.Flush()
	return b.String()
}

func labelled(l string) string {
	if l == "" {
		return ""
	}
	return " [" + l + "]"
}

func (r Report) write(dir string) error {
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(raw, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "report.svg"), []byte(r.SVG()), 0o644)
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }
