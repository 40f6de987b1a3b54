package loadgen

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
)

// Latencies summarises millisecond samples.
func Latencies(ms []float64) Percentiles {
	if len(ms) == 0 {
		return Percentiles{}
	}
	sorted := slices.Clone(ms)
	slices.Sort(sorted)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(sorted)))) - 1
		return round(sorted[max(0, min(i, len(sorted)-1))])
	}
	sum := 0.0
	for _, v := range sorted {
		sum += v
	}
	return Percentiles{Count: len(sorted), Avg: round(sum / float64(len(sorted))), Min: round(sorted[0]),
		P50: at(0.5), P90: at(0.9), P95: at(0.95), P99: at(0.99), Max: round(sorted[len(sorted)-1])}
}

func round(v float64) float64 { return math.Round(v*10) / 10 }

// Table renders the summary like k6's end-of-test report.
func (s Summary) Table() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "\n  load: %.1f orders/s for %.0fs\n\n", s.Rate, s.DurationSec)
	fmt.Fprintf(w, "  orders_started\t%d\n", s.Started)
	fmt.Fprintf(w, "  orders_failed_to_start\t%d\t%.2f%%\n", s.FailedToStart, pct(s.FailedToStart, s.Started+s.FailedToStart))
	keys := make([]string, 0, len(s.Final))
	for k := range s.Final {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  final_%s\t%d\t%.2f%%\n", strings.ToLower(k), s.Final[k], pct(s.Final[k], s.Started))
	}
	row := func(name string, p Percentiles) {
		fmt.Fprintf(w, "  %s\tavg=%.1fms\tmin=%.1fms\tp(50)=%.1fms\tp(90)=%.1fms\tp(95)=%.1fms\tp(99)=%.1fms\tmax=%.1fms\n",
			name, p.Avg, p.Min, p.P50, p.P90, p.P95, p.P99, p.Max)
	}
	row("latency_first_answer", s.StartLatency)
	row("latency_final_status", s.FinalLatency)
	if len(s.BreakerChanges) == 0 {
		fmt.Fprintf(w, "  breaker_changes\tnone seen\n")
	}
	for _, c := range s.BreakerChanges {
		fmt.Fprintf(w, "  breaker_change\tT+%.1fs\t%s -> %s\t(%s)\n", c.Offset, c.From, c.To, c.Where())
	}
	w.Flush()
	return b.String()
}

func pct(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}
