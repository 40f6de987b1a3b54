package outage

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/loadgen"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/worker/metrics"
)

// Report is the demo's result: what the article measured, and the money.
type Report struct {
	// Via is how the orders were placed (--via): the first answer is a
	// workflow start (temporal) or an HTTP answer of the API (api, and
	// vegeta, timed by vegeta).
	Via string `json:"via"`
	// Vegeta is the load client's own account (--via vegeta).
	Vegeta *VegetaSummary `json:"vegeta,omitempty"`
	// IdempotencyKeys: the workers sent every create under the order's
	// Idempotency-Key (--idempotency-keys).
	IdempotencyKeys bool                    `json:"idempotencyKeys"`
	Rate            float64                 `json:"rate"`
	DurationSeconds float64                 `json:"durationSeconds"`
	Gateway         []GatewayEvent          `json:"gatewayEvents"`
	Breaker         []loadgen.BreakerChange `json:"breakerChanges"`
	// The lookup breaker's (the article's): gateway down → OPEN, gateway up
	// → CLOSED; the create breaker's beside them.
	OutageToOpen          *float64       `json:"outageToOpenSeconds"`
	RecoveryToClose       *float64       `json:"recoveryToClosedSeconds"`
	CreateOutageToOpen    *float64       `json:"createOutageToOpenSeconds,omitempty"`
	CreateRecoveryToClose *float64       `json:"createRecoveryToClosedSeconds,omitempty"`
	Started               int            `json:"ordersStarted"`
	FailedToStart         int            `json:"ordersFailedToStart"`
	Final                 map[string]int `json:"finalStatuses"`
	Unfinished            int            `json:"ordersUnfinished"`
	// First-answer latency of orders placed while the breaker was closed vs open.
	FirstAnswerClosed loadgen.Percentiles `json:"firstAnswerWhileClosed"`
	FirstAnswerOpen   loadgen.Percentiles `json:"firstAnswerWhileOpen"`
	FinalLatency      loadgen.Percentiles `json:"finalStatusLatency"`
	// Lookup latency in the worker, by outcome: reaching the gateway vs refused by the open breaker.
	LookupLatency map[string]LatencyMean `json:"lookupLatency"`
	// The double-charge oracle, from the gateway's own books.
	MaxCreateRequestsPerOrder int                   `json:"maxCreateRequestsPerOrder"`
	MaxTransactionsPerOrder   int                   `json:"maxTransactionsPerOrder"`
	OrdersChargedTwice        int                   `json:"ordersChargedTwice"`
	CreateRequestsHistogram   map[int]int           `json:"createRequestsPerOrder"`
	Orders                    []loadgen.OrderSample `json:"orders"`
	// BeganAt is time zero of every offset in the report.
	BeganAt time.Time `json:"beganAt"`
	// Lost orders and final-status latency by the database's account
	// (AddOutcomes): every order, then split by when it was placed.
	Outcomes       loadgen.Outcomes `json:"outcomes"`
	PlacedWhileUp  loadgen.Outcomes `json:"outcomesPlacedWhileGatewayUp"`
	PlacedInOutage loadgen.Outcomes `json:"outcomesPlacedDuringOutage"`
	// OutageEndToFinal is, for the orders placed during the outage, the
	// gateway's return → their final status (ms; 0 for one final before).
	OutageEndToFinal loadgen.Percentiles `json:"outageEndToFinal"`
	// The orders placed while the gateway was up, split again: those the
	// outage caught (placed before it, still open when it began: their
	// answer could not come before the gateway's return, so they are timed
	// from it, like the outage's own) and the rest, which it never touched.
	UntouchedByOutage      loadgen.Outcomes    `json:"outcomesUntouchedByOutage"`
	CaughtByOutage         loadgen.Outcomes    `json:"outcomesCaughtByOutage"`
	CaughtOutageEndToFinal loadgen.Percentiles `json:"caughtOutageEndToFinal"`
	// OpenBreakerRefusal is what a lookup or create refused by the open
	// breaker cost inside the activity (ms), from the first worker's
	// refusal histogram (ScrapeOpenBreakerRefusal): its percentiles are
	// the upper bounds of the buckets they fall in, and it has no min or
	// max. nil when not scraped. ByEndpoint splits it: lookup, create.
	OpenBreakerRefusal           *loadgen.Percentiles           `json:"openBreakerRefusal,omitempty"`
	OpenBreakerRefusalByEndpoint map[string]loadgen.Percentiles `json:"openBreakerRefusalByEndpoint,omitempty"`
}

// LatencyMean is a histogram's count and mean.
type LatencyMean struct {
	Count  int     `json:"count"`
	MeanMs float64 `json:"meanMs"`
}

// BuildReport sums a run up.
func BuildReport(sum loadgen.Summary, events []GatewayEvent, stats simulator.Stats, lookups map[string]LatencyMean) Report {
	r := Report{Rate: sum.Rate, DurationSeconds: sum.DurationSec, Gateway: events, Breaker: sum.BreakerChanges,
		Started: sum.Started, FailedToStart: sum.FailedToStart, Final: sum.Final, FinalLatency: sum.FinalLatency,
		LookupLatency: lookups, CreateRequestsHistogram: map[int]int{}, Orders: sum.Orders, BeganAt: sum.BeganAt}
	r.Unfinished = sum.Final["UNFINISHED"]
	var down, up *float64
	for _, e := range events {
		v := e.Offset
		if e.Down && down == nil {
			down = &v
		}
		if !e.Down && up == nil {
			up = &v
		}
	}
	r.OutageToOpen, r.RecoveryToClose = breakerTimes(sum.BreakerChanges, activities.LookupBreakerName, down, up)
	r.CreateOutageToOpen, r.CreateRecoveryToClose = breakerTimes(sum.BreakerChanges, activities.CreateBreakerName, down, up)
	var closed, open []float64
	for _, o := range sum.Orders {
		if o.StartError != "" {
			continue
		}
		if o.BreakerAtFire == gobreaker.StateClosed.String() {
			closed = append(closed, o.StartMillis)
		} else {
			open = append(open, o.StartMillis)
		}
	}
	r.FirstAnswerClosed, r.FirstAnswerOpen = loadgen.Latencies(closed), loadgen.Latencies(open)
	for _, st := range stats.Orders {
		r.CreateRequestsHistogram[st.CreateRequests]++
		r.MaxCreateRequestsPerOrder = max(r.MaxCreateRequestsPerOrder, st.CreateRequests)
		r.MaxTransactionsPerOrder = max(r.MaxTransactionsPerOrder, len(st.Transactions))
		if st.Successful+st.Refunded > 1 || st.Successful > 1 {
			r.OrdersChargedTwice++
		}
	}
	return r
}

func round1(v float64) float64 { return float64(int(v*10+0.5)) / 10 }

// AddOutcomes sums up the database's outcomes of the run's orders: lost
// orders and final-status latency, for all of them and split by whether
// each was placed while the gateway was up or during the outage (from the
// first DOWN to the UP after it; to the end of the run when it never came
// back).
func (r *Report) AddOutcomes(outs []store.Outcome) {
	r.Outcomes = loadgen.SumOutcomes(outs)
	down, up := math.Inf(1), math.Inf(1)
	for _, e := range r.Gateway {
		switch {
		case e.Down && math.IsInf(down, 1):
			down = e.Offset
		case !e.Down && !math.IsInf(down, 1) && math.IsInf(up, 1):
			up = e.Offset
		}
	}
	offset := func(t time.Time) float64 { return t.Sub(r.BeganAt).Seconds() }
	sinceUp := func(o store.Outcome) (float64, bool) {
		if !o.Final() || math.IsInf(up, 1) {
			return 0, false
		}
		return math.Max(0, offset(o.FinalAt)-up) * 1000, true
	}
	var whileUp, untouched, caught, inOutage []store.Outcome
	var caughtSinceUp, outageSinceUp []float64
	for _, o := range outs {
		placed := offset(o.PlacedAt)
		switch {
		case placed >= down && placed < up:
			inOutage = append(inOutage, o)
			if ms, ok := sinceUp(o); ok {
				outageSinceUp = append(outageSinceUp, ms)
			}
			continue
		case placed < down && (!o.Final() || offset(o.FinalAt) >= down):
			caught = append(caught, o)
			if ms, ok := sinceUp(o); ok {
				caughtSinceUp = append(caughtSinceUp, ms)
			}
		default:
			untouched = append(untouched, o)
		}
		whileUp = append(whileUp, o)
	}
	r.PlacedWhileUp, r.PlacedInOutage = loadgen.SumOutcomes(whileUp), loadgen.SumOutcomes(inOutage)
	r.UntouchedByOutage, r.CaughtByOutage = loadgen.SumOutcomes(untouched), loadgen.SumOutcomes(caught)
	r.OutageEndToFinal, r.CaughtOutageEndToFinal = loadgen.Latencies(outageSinceUp), loadgen.Latencies(caughtSinceUp)
}

// Text renders the report for the terminal.
func (r Report) Text() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "\n  payguard outage demo: %.1f orders/s for %.0fs\n\n", r.Rate, r.DurationSeconds)
	for _, e := range r.Gateway {
		state := "UP"
		if e.Down {
			state = "DOWN"
		}
		fmt.Fprintf(w, "  gateway %s\tT+%.1fs\n", state, e.Offset)
	}
	for _, c := range r.Breaker {
		fmt.Fprintf(w, "  breaker %s -> %s\tT+%.1fs\t%s\n", strings.ToUpper(c.From), strings.ToUpper(c.To), c.Offset, c.Where())
	}
	fmt.Fprintf(w, "  outage -> OPEN\t%s\t(lookup breaker; article: 2 s)\n", secs(r.OutageToOpen))
	fmt.Fprintf(w, "  recovery -> CLOSED\t%s\t(lookup breaker; article: HALF_OPEN 5 s after recovery, then 3 good calls)\n", secs(r.RecoveryToClose))
	fmt.Fprintf(w, "  create breaker\topen %s after the outage, closed %s after recovery\n", secs(r.CreateOutageToOpen), secs(r.CreateRecoveryToClose))
	firstAnswer := "workflow started"
	switch r.Via {
	case ViaAPI:
		firstAnswer = "POST /api/v1/orders answered"
	case ViaVegeta:
		firstAnswer = "POST /api/v1/orders answered, timed by vegeta"
	}
	fmt.Fprintf(w, "\n  orders placed via\t%s\t(first answer: %s)\n", orDefault(r.Via, ViaTemporal), firstAnswer)
	if r.IdempotencyKeys {
		fmt.Fprintf(w, "  creates sent\tunder keys\t(--idempotency-keys: a re-send under the order's key cannot charge twice)\n")
	}
	fmt.Fprintf(w, "  orders started\t%d\n", r.Started)
	fmt.Fprintf(w, "  orders failed to start\t%d\t(article: 0%% HTTP failures)\n", r.FailedToStart)
	keys := make([]string, 0, len(r.Final))
	for k := range r.Final {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  final %s\t%d\n", k, r.Final[k])
	}
	fmt.Fprintf(w, "\n  first answer, breaker CLOSED\tp50 %.1f ms\tp95 %.1f ms\t(%d orders)\n", r.FirstAnswerClosed.P50, r.FirstAnswerClosed.P95, r.FirstAnswerClosed.Count)
	fmt.Fprintf(w, "  first answer, breaker not CLOSED\tp50 %.1f ms\tp95 %.1f ms\t(%d orders)\n", r.FirstAnswerOpen.P50, r.FirstAnswerOpen.P95, r.FirstAnswerOpen.Count)
	fmt.Fprintf(w, "  final status\tp50 %.0f ms\tp95 %.0f ms\tmax %.0f ms\n", r.FinalLatency.P50, r.FinalLatency.P95, r.FinalLatency.Max)
	outcomes := make([]string, 0, len(r.LookupLatency))
	for k := range r.LookupLatency {
		outcomes = append(outcomes, k)
	}
	sort.Strings(outcomes)
	for _, k := range outcomes {
		l := r.LookupLatency[k]
		fmt.Fprintf(w, "  status lookup, %s\tmean %.2f ms\t(%d calls)\n", k, l.MeanMs, l.Count)
	}
	fmt.Fprintf(w, "\n  lost orders\t%s\t(CANCELLED without an operator's cancel, or charged then refunded)\n", r.Outcomes.LostLine())
	fmt.Fprintf(w, "    placed while the gateway was up\t%s\n", r.PlacedWhileUp.LostLine())
	fmt.Fprintf(w, "    placed during the outage\t%s\n", r.PlacedInOutage.LostLine())
	if len(r.Outcomes.LostExamples) > 0 {
		fmt.Fprintf(w, "    e.g.\t%s\n", strings.Join(r.Outcomes.LostExamples, " "))
	}
	fmt.Fprintf(w, "  placed -> final status\t%s\t(database)\n", r.Outcomes.LatencyLine())
	fmt.Fprintf(w, "    placed while the gateway was up\t%s\n", r.PlacedWhileUp.LatencyLine())
	fmt.Fprintf(w, "      not caught by the outage\t%s\t(target p95 ≤ 15 s)\n", r.UntouchedByOutage.LatencyLine())
	fmt.Fprintf(w, "      caught by it, outage end -> final\t%s\t(placed before it, open when it began)\n", loadgen.LatencyLine(r.CaughtOutageEndToFinal))
	fmt.Fprintf(w, "    placed during the outage\t%s\n", r.PlacedInOutage.LatencyLine())
	fmt.Fprintf(w, "    outage end -> final status\t%s\t(orders placed during the outage; target ≤ 20 s)\n", loadgen.LatencyLine(r.OutageEndToFinal))
	if p := r.OpenBreakerRefusal; p != nil {
		fmt.Fprintf(w, "  open-breaker refusal, in the activity\tp50 ≤ %.3f ms, p99 ≤ %.3f ms\t(%d calls; target p99 ≤ 1 ms)\n", p.P50, p.P99, p.Count)
		for _, k := range []string{"lookup", "create"} {
			if e, ok := r.OpenBreakerRefusalByEndpoint[k]; ok {
				fmt.Fprintf(w, "    %s\tp50 ≤ %.3f ms, p99 ≤ %.3f ms\t(%d calls)\n", k, e.P50, e.P99, e.Count)
			}
		}
	} else {
		fmt.Fprintf(w, "  open-breaker refusal, in the activity\tnone\t(no call was refused by an open breaker)\n")
	}
	fmt.Fprintf(w, "\n  create requests per order (max)\t%d\n", r.MaxCreateRequestsPerOrder)
	fmt.Fprintf(w, "  transactions per order (max)\t%d\t(must be 1: never a second create that reached the gateway)\n", r.MaxTransactionsPerOrder)
	fmt.Fprintf(w, "  orders charged twice\t%d\n", r.OrdersChargedTwice)
	if v := r.Vegeta; v != nil {
		fmt.Fprintf(w, "\n  vegeta: requests\t%d\n", v.Requests)
		fmt.Fprintf(w, "  vegeta: failed requests\t%d\t(threshold: 0, the article's http_req_failed)\n", v.Failed)
		fmt.Fprintf(w, "  vegeta: PENDING answers, breaker not CLOSED\t%d\t(the article's \"payment being confirmed\")\n", v.PendingWhileOpen)
	}
	w.Flush()
	if r.Vegeta != nil {
		b.WriteString("\n  vegeta report:\n")
		for _, line := range strings.Split(strings.TrimRight(r.Vegeta.Report, "\n"), "\n") {
			b.WriteString("    " + line + "\n")
		}
	}
	return b.String()
}

func secs(v *float64) string {
	if v == nil {
		return "not seen"
	}
	return fmt.Sprintf("%.1f s", *v)
}

// ScrapeLookupLatency reads the worker's lookup histogram: count and mean
// per outcome (ok, unreachable, breaker_open, ...).
func ScrapeLookupLatency(ctx context.Context, metricsURL string) (map[string]LatencyMean, error) {
	samples, err := metrics.Scrape(ctx, metricsURL, metrics.LookupDuration+"_sum", metrics.LookupDuration+"_count")
	if err != nil {
		return nil, err
	}
	sums, counts := map[string]float64{}, map[string]float64{}
	for _, s := range samples {
		if strings.HasSuffix(s.Name, "_sum") {
			sums[s.Labels["outcome"]] += s.Value
		} else {
			counts[s.Labels["outcome"]] += s.Value
		}
	}
	out := map[string]LatencyMean{}
	for k, n := range counts {
		if n > 0 {
			out[k] = LatencyMean{Count: int(n), MeanMs: math.Round(sums[k]/n*1000*1000) / 1000}
		}
	}
	return out, nil
}

// ScrapeOpenBreakerRefusal reads the worker's refusal histogram
// (metrics.BreakerRefusalDuration) for the calls refused while the breaker
// was open: all of them, and by endpoint (lookup and lookup-by-order as
// lookup; create). nil when there were none.
func ScrapeOpenBreakerRefusal(ctx context.Context, metricsURL string) (*loadgen.Percentiles, map[string]loadgen.Percentiles, error) {
	name := metrics.BreakerRefusalDuration
	samples, err := metrics.Scrape(ctx, metricsURL, name+"_bucket", name+"_sum")
	if err != nil {
		return nil, nil, err
	}
	all, by := &histogram{}, map[string]*histogram{}
	for _, s := range samples {
		if s.Labels["state"] != "open" {
			continue
		}
		endpoint := s.Labels["endpoint"]
		if endpoint == "lookup-by-order" {
			endpoint = "lookup"
		}
		if by[endpoint] == nil {
			by[endpoint] = &histogram{}
		}
		all.add(s)
		by[endpoint].add(s)
	}
	if all.count() == 0 {
		return nil, nil, nil
	}
	total, split := all.percentiles(), map[string]loadgen.Percentiles{}
	for k, h := range by {
		if h.count() > 0 {
			split[k] = h.percentiles()
		}
	}
	return &total, split, nil
}

// histogram sums Prometheus histogram series: cumulative counts by upper
// bound (seconds), and the sum.
type histogram struct {
	buckets map[float64]float64
	sum     float64
}

func (h *histogram) add(s metrics.Sample) {
	if h.buckets == nil {
		h.buckets = map[float64]float64{}
	}
	if !strings.HasSuffix(s.Name, "_bucket") {
		h.sum += s.Value
		return
	}
	le, err := strconv.ParseFloat(s.Labels["le"], 64) // "+Inf" parses as +Inf
	if err == nil {
		h.buckets[le] += s.Value
	}
}

func (h *histogram) count() float64 { return h.buckets[math.Inf(1)] }

// percentiles in ms: each the upper bound of the first bucket holding that
// share of the calls.
func (h *histogram) percentiles() loadgen.Percentiles {
	bounds := make([]float64, 0, len(h.buckets))
	for le := range h.buckets {
		bounds = append(bounds, le)
	}
	sort.Float64s(bounds)
	n := h.count()
	at := func(q float64) float64 {
		for _, le := range bounds {
			if h.buckets[le] >= q*n {
				return le * 1000
			}
		}
		return math.Inf(1)
	}
	return loadgen.Percentiles{Count: int(n), Avg: h.sum / n * 1000, P50: at(0.5), P90: at(0.9), P95: at(0.95), P99: at(0.99)}
}

// timed: the outage and recovery are timed by the first worker's breakers
// (in a fleet every worker's changes are listed all the same): the lookup
// breaker, as in the article, or the request breaker, which trips first
// when no create gets through.
func timed(c loadgen.BreakerChange) bool { return c.Worker == "" }

// breakerTimes are how long the named breaker took to open after the
// gateway went down, and to close after it came back (nil: it did not).
func breakerTimes(changes []loadgen.BreakerChange, name string, down, up *float64) (toOpen, toClosed *float64) {
	for _, c := range changes {
		if !timed(c) || c.Breaker != name {
			continue
		}
		if c.To == gobreaker.StateOpen.String() && down != nil && toOpen == nil && c.Offset >= *down {
			v := round1(c.Offset - *down)
			toOpen = &v
		}
		if c.To == gobreaker.StateClosed.String() && up != nil && toClosed == nil && c.Offset >= *up {
			v := round1(c.Offset - *up)
			toClosed = &v
		}
	}
	return toOpen, toClosed
}

// lookupChanges are the changes the timeline's band draws: the first
// worker's lookup breaker.
func (r Report) lookupChanges() []loadgen.BreakerChange {
	var out []loadgen.BreakerChange
	for _, c := range r.Breaker {
		if timed(c) && c.Breaker == activities.LookupBreakerName {
			out = append(out, c)
		}
	}
	return out
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
