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

	"github.com/payguard/payguard/loadgen"
)

// Report is one bench run: bench-out/report.json.
type Report struct {
	Label      string   `json:"label,omitempty"`
	Quick      bool     `json:"quick"`
	Machine    Machine  `json:"machine"`
	WorkerArgs []string `json:"workerArgs,omitempty"`
	Eager      bool     `json:"eager"`
	// QuietWaitSec is how long the bench waited for the dev server to go
	// quiet after the baseline, before payguard's steps (quiet.go).
	QuietWaitSec float64 `json:"quietWaitSeconds"`
	// Restarts counts the dev server's restarts before a timed phase that
	// followed a step not sustained (run.go).
	Restarts int       `json:"devServerRestarts"`
	Baseline *Baseline `json:"baseline,omitempty"`
	Steps    []Step    `json:"steps,omitempty"`
	// BaselineAfter is the baseline run again after the steps, when both
	// phases ran: the two bracket payguard's steps.
	BaselineAfter *Baseline `json:"baselineAfter,omitempty"`
	// BaselinePerSecond is what the ratio divides by: the mean of the two
	// baselines' workflows/s, or the one baseline's.
	BaselinePerSecond float64 `json:"baselineWorkflowsPerSecond"`
	Sustained         float64 `json:"sustainedOrdersPerSecond"` // the highest sustained step's confirmed/s
	Ratio             float64 `json:"ratioToBaseline"`          // the headline: Sustained / BaselinePerSecond
	// APISteps are the same steps with every order placed through the
	// HTTP order API (the api phase); APISustained their highest
	// sustained confirmed/s, APIRatio that over Sustained (target ≥ 0.9).
	APISteps     []Step         `json:"apiSteps,omitempty"`
	APISustained float64        `json:"apiSustainedOrdersPerSecond,omitempty"`
	APIRatio     float64        `json:"ratioApiToDirect,omitempty"`
	Breaker      *BreakerResult `json:"breaker,omitempty"`
	Capacity     *Capacity      `json:"capacity,omitempty"`
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

// apiRatioTarget is the bar for orders through the API: at least
// this share of the direct rate (measured, never asserted).
const apiRatioTarget = 0.9

// highestSustained is the highest sustained step's confirmed/s.
func highestSustained(steps []Step) float64 {
	best := 0.0
	for _, s := range steps {
		if s.Sustained {
			best = math.Max(best, s.Throughput)
		}
	}
	return best
}

// summarise takes the highest sustained steps and the ratios.
func (r *Report) summarise() {
	r.Sustained = highestSustained(r.Steps)
	r.APISustained, r.APIRatio = highestSustained(r.APISteps), 0
	if len(r.APISteps) > 0 && r.Sustained > 0 {
		r.APIRatio = round2(r.APISustained / r.Sustained)
	}
	r.BaselinePerSecond = 0
	if r.Baseline != nil {
		r.BaselinePerSecond = r.Baseline.PerSecond
		if a := r.BaselineAfter; a != nil {
			r.BaselinePerSecond = round2((r.Baseline.PerSecond + a.PerSecond) / 2)
		}
	}
	if r.BaselinePerSecond > 0 {
		r.Ratio = round2(r.Sustained / r.BaselinePerSecond)
	}
}

// Table is the run for the terminal and the README.
func (r Report) Table() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "\n  payguard bench%s — %d CPUs (%s), load average %s before, %s after\n\n", labelled(r.Label), r.Machine.CPUs,
		r.Machine.Model, r.Machine.LoadBefore, r.Machine.LoadAfter)
	fmt.Fprintf(w, "  measure\tvalue\tdetail\n")
	baseline := func(when string, b *Baseline) {
		if b != nil {
			fmt.Fprintf(w, "  no-op baseline%s (%d activities, %d in flight)\t%.1f workflows/s\tp50 %.0f ms, p99 %.0f ms, %d errors; CPU per workflow: %s\n",
				when, b.Activities, b.InFlight, b.PerSecond, b.Latency.P50, b.Latency.P99, b.Errors, b.CPU)
		}
	}
	baseline("", r.Baseline)
	steps := func(name string, steps []Step) {
		for _, s := range steps {
			fmt.Fprintf(w, "  %s at %g orders/s offered\t%.1f confirmed/s\tp50 %.0f ms, p95 %.0f ms, p99 %.0f ms, first answer p50 %.0f ms, %d lost, %s; CPU per order: %s\n",
				name, s.Offered, s.Throughput, s.Latency.P50, s.Latency.P95, s.Latency.P99, s.FirstAnswer.P50, s.Outcomes.Lost, verdict(s), s.CPU)
		}
	}
	steps("payguard", r.Steps)
	steps("payguard via API", r.APISteps)
	baseline(" again", r.BaselineAfter)
	restarts := ""
	if r.Restarts > 0 {
		restarts = fmt.Sprintf("; dev server restarted %d× after steps not sustained", r.Restarts)
	}
	if len(r.Steps) > 0 {
		fmt.Fprintf(w, "  payguard sustained\t%.1f orders/s\tevery order CONFIRMED, p99 < %s%s\n", r.Sustained, sustainP99, restarts)
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
	if r.Baseline != nil && len(r.Steps) > 0 {
		against := "the baseline"
		if r.BaselineAfter != nil {
			against = fmt.Sprintf("the baselines' mean, %.1f workflows/s", r.BaselinePerSecond)
		}
		fmt.Fprintf(w, "  ratio payguard / no-op (headline)\t%.2f×\tagainst %s; target ≥ 1.0×\n", r.Ratio, against)
	}
	if c := r.Capacity; c != nil {
		fmt.Fprintf(w, "  %d waiting orders (of %d): worker RSS\t%.1f MB per 1000\t%.0f → %.0f MB (target 10 000 ≤ 300 MB)\n",
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
