package runner

import (
	"fmt"
	"html"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/payguard/payguard/chaos/check"
	"github.com/payguard/payguard/demo/outage"
	"github.com/payguard/payguard/loadgen"
)

// Report is chaos-out/report.json.
type Report struct {
	Seed            uint64         `json:"seed"`
	DurationSeconds float64        `json:"durationSeconds"`
	Rate            float64        `json:"rate"`
	ElapsedSeconds  float64        `json:"elapsedSeconds"`
	Replay          string         `json:"replay"`
	Schedule        []Fault        `json:"schedule"`
	Placed          int            `json:"ordersPlaced"`
	Final           map[string]int `json:"ordersByFinalStatus"` // the database's statuses
	Cancels         int            `json:"operatorCancels"`
	// CancelledEarly were cancelled before their stock was reserved: no
	// record in the database, nothing at the gateway.
	CancelledEarly []string              `json:"cancelledBeforeReserve"`
	Forged         []check.Forged        `json:"forgedCallbacks"`
	Settled        bool                  `json:"settled"`
	Invariants     []check.Result        `json:"invariants"`
	Violations     int                   `json:"violations"`
	Orders         []loadgen.OrderSample `json:"orders"`
	// Outcomes are the lost orders and the final-status latency, by the
	// database's account (store.Outcomes).
	Outcomes loadgen.Outcomes `json:"outcomes"`
	// LongEnough is I8's bound (seconds), LongEnoughRule what it adds up;
	// Unreachable the stretches I8 counted the gateway not reachable.
	LongEnough     float64         `json:"i8LongEnoughSeconds"`
	LongEnoughRule string          `json:"i8LongEnough"`
	Unreachable    []check.Stretch `json:"gatewayUnreachable"`
	// CreatedThen500 is what became of the creates pgsim answered 500
	// after making their transaction.
	CreatedThen500 Created500 `json:"createdThen500"`
}

// Created500 sums up the creates answered 500 after acting, and their orders.
type Created500 struct {
	Creates int `json:"creates"`
	Orders  int `json:"orders"`
	// Lost of those orders; Resent: with a second transaction (a re-send
	// the lookup should have stopped).
	Lost   int `json:"lost"`
	Resent int `json:"resent"`
}

func created500(b check.Books) Created500 {
	var c Created500
	for id, g := range b.Gateway {
		if g.CreatedThen500 == 0 {
			continue
		}
		c.Creates += g.CreatedThen500
		c.Orders++
		if b.Outcomes[id].Lost != "" {
			c.Lost++
		}
		if len(g.Transactions) > 1 {
			c.Resent++
		}
	}
	return c
}

func buildReport(o Options, plan []Fault, sum loadgen.Summary, b check.Books, tr *traffic, settled bool, took time.Duration) Report {
	r := Report{Seed: o.Seed, DurationSeconds: o.Duration.Seconds(), Rate: o.Rate, ElapsedSeconds: math.Round(took.Seconds()),
		Replay:   fmt.Sprintf("go run ./chaos --seed %d --duration %s --rate %v", o.Seed, o.Duration, o.Rate),
		Schedule: plan, Placed: len(sum.Orders), Final: map[string]int{}, Forged: b.Forged, Settled: settled,
		Invariants: check.Run(b), Orders: sum.Orders, Outcomes: loadgen.SumOutcomes(slices.Collect(maps.Values(b.Outcomes))),
		LongEnough: b.LongEnough.Seconds(), Unreachable: b.Unreachable, CreatedThen500: created500(b)}
	r.Violations = check.Violations(r.Invariants)
	r.CancelledEarly = check.CancelledBeforeReserve(b)
	for _, ord := range b.Orders {
		r.Final[string(ord.Status)]++
	}
	tr.mu.Lock()
	r.Cancels = len(tr.cancels)
	tr.mu.Unlock()
	// The picture colours each order by the database's final status, the
	// one the checker judged.
	for i, s := range r.Orders {
		if ord, ok := b.Orders[s.OrderID]; ok {
			r.Orders[i].Final = string(ord.Status)
		}
	}
	return r
}

// Text is the terminal's summary table.
func (r Report) Text() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "\n  payguard chaos, seed %d: %.1f orders/s for %.0fs (%.0fs in all)\n\n", r.Seed, r.Rate, r.DurationSeconds, r.ElapsedSeconds)
	applied := 0
	kinds := map[string]int{}
	for _, f := range r.Schedule {
		if f.Applied {
			applied++
			kinds[f.Kind]++
		}
	}
	fmt.Fprintf(w, "  faults applied\t%d of %d\t", applied, len(r.Schedule))
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		fmt.Fprintf(w, "%s×%d ", k, kinds[k])
	}
	fmt.Fprintf(w, "\n  orders placed\t%d\t", r.Placed)
	for _, k := range slices.Sorted(maps.Keys(r.Final)) {
		fmt.Fprintf(w, "%s %d  ", k, r.Final[k])
	}
	refused := 0
	for _, f := range r.Forged {
		if f.Code >= 400 && f.Code < 500 {
			refused++
		}
	}
	fmt.Fprintf(w, "\n  operator cancels\t%d (%d before the reservation)\n  forged callbacks\t%d sent, %d refused with 4xx\n", r.Cancels, len(r.CancelledEarly), len(r.Forged), refused)
	fmt.Fprintf(w, "  lost orders\t%s\t", r.Outcomes.LostLine())
	if len(r.Outcomes.LostExamples) > 0 {
		fmt.Fprintf(w, "e.g. %s", strings.Join(r.Outcomes.LostExamples, " "))
	}
	fmt.Fprintf(w, "\n  placed -> final status\t%s\n", r.Outcomes.LatencyLine())
	c := r.CreatedThen500
	fmt.Fprintf(w, "  500 after creating\t%d creates, %d orders\t%d of them lost, %d with a second transaction\n", c.Creates, c.Orders, c.Lost, c.Resent)
	cut := 0.0
	for _, u := range r.Unreachable {
		cut += u.To.Sub(u.From).Seconds()
	}
	fmt.Fprintf(w, "  gateway unreachable\t%d stretches, %.0fs in all\t(the faults that cut it, overlaps counted twice)\n", len(r.Unreachable), cut)
	fmt.Fprintf(w, "  I8 long enough\t%s\n", r.LongEnoughRule)
	if !r.Settled {
		fmt.Fprintf(w, "  NOT SETTLED\tsome orders, workflows or transactions were still open at the end\n")
	}
	fmt.Fprintf(w, "\n  invariant\tchecked\tviolations\trule\n")
	for _, inv := range r.Invariants {
		fmt.Fprintf(w, "  %s\t%d\t%d\t%s\n", inv.ID, inv.Checked, inv.Violations, inv.Rule)
	}
	w.Flush()
	for _, inv := range r.Invariants {
		for _, e := range inv.Examples {
			fmt.Fprintf(&b, "    %s: %s\n", inv.ID, e)
		}
	}
	verdict := "0 violations"
	if r.Violations > 0 {
		verdict = fmt.Sprintf("%d VIOLATIONS — replay: %s", r.Violations, r.Replay)
	}
	fmt.Fprintf(&b, "\n  %s\n\n", verdict)
	return b.String()
}

// faultColors: one colour per class of fault.
func faultColor(kind string) string {
	switch {
	case strings.HasPrefix(kind, "link-"):
		return "#1565c0"
	case strings.HasPrefix(kind, "pgsim-"), strings.HasPrefix(kind, "callbacks-"):
		return "#c62828"
	case kind == WorkerKill:
		return "#6a1b9a"
	case kind == PostgresTerminate:
		return "#00838f"
	}
	return "#ef6c00"
}

// SVG is the timeline: each fault a band on its own row, each order's time
// to its final status below, drawn by the demo's order panel.
func (r Report) SVG() string {
	const width, left, right, rowH, bandTop = 1000.0, 170.0, 20.0, 12.0, 50.0
	span := math.Max(r.DurationSeconds, 1) * 1.05
	for _, o := range r.Orders {
		span = math.Max(span, o.StartOffset*1.05)
	}
	for _, f := range r.Schedule {
		span = math.Max(span, (f.At+f.For)*1.02)
	}
	plotTop := bandTop + rowH*float64(len(r.Schedule)) + 30
	plot := outage.OrderPlot{Left: left, Right: right, Width: width, Top: plotTop, Height: 240, Span: span}
	height := plotTop + 240 + 70
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="24" font-size="16" font-weight="bold">payguard chaos, seed %d: %.1f orders/s for %.0f s, %d violations, %d orders lost</text>`+"\n",
		left, r.Seed, r.Rate, r.DurationSeconds, r.Violations, r.Outcomes.Lost)
	for i, f := range r.Schedule {
		y := bandTop + rowH*float64(i)
		opacity := 0.85
		if !f.Applied {
			opacity = 0.2
		}
		// Instant faults (a restart, terminated backends) get a visible sliver.
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.0f" fill="%s" fill-opacity="%.2f"><title>%s %s %s at %.1fs for %.1fs</title></rect>`+"\n",
			plot.X(f.At), y, math.Max(plot.X(f.At+f.For)-plot.X(f.At), 3), rowH-2, faultColor(f.Kind), opacity,
			f.ID, html.EscapeString(f.Kind), html.EscapeString(f.Target), f.At, f.For)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end" font-size="9">%s %s</text>`+"\n", left-4, y+rowH-3,
			html.EscapeString(f.Kind), html.EscapeString(f.Target))
	}
	plot.Draw(&b, r.Orders)
	outage.FinalLegend(&b, left, height-26)
	b.WriteString("</svg>\n")
	return b.String()
}
