package harness

import (
	"fmt"
	"math"
	"strings"

	"github.com/payguard/payguard/demo/outage"
)

// SVG draws the rate phase: confirmed orders/s against the offered rate
// (the baselines' sustained workflows/s dashed lines) above, p99 time to final
// status on the outage demo's log scale below; the steps through the HTTP
// order API (the api phase), when they ran, beside them in purple.
func (r Report) SVG() string {
	const (
		width, left, right = 900.0, 70.0, 30.0
		topY, topH         = 50.0, 220.0
		lowY, lowH         = 320.0, 200.0
		height             = 580.0
	)
	maxRate := 1.0
	for _, s := range append(append([]Step{}, r.Steps...), r.APISteps...) {
		maxRate = math.Max(maxRate, math.Max(s.Offered, s.Throughput))
	}
	maxRate = math.Max(maxRate, math.Max(r.BaselinePerSecond, r.MinimalPerSecond))
	maxRate *= 1.1
	x := func(rate float64) float64 { return left + (width-left-right)*rate/maxRate }
	yRate := func(rate float64) float64 { return topY + topH - topH*rate/maxRate }
	low := outage.OrderPlot{Left: left, Right: right, Width: width, Top: lowY, Height: lowH, Span: maxRate}

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="24" font-size="16" font-weight="bold">payguard bench%s: sustained %.1f orders/s = %.2f× the minimal workflow</text>`+"\n",
		left, labelled(r.Label), r.Sustained, r.RatioToMinimal)
	if len(r.APISteps) > 0 {
		fmt.Fprintf(&b, `<text x="%.0f" y="42" fill="%s">through the HTTP order API: sustained %.1f orders/s = %.2f× direct</text>`+"\n",
			left, apiColor, r.APISustained, r.APIRatio)
	}

	// Upper panel: throughput, the ideal diagonal, the baseline.
	fmt.Fprintf(&b, `<text transform="translate(16,%.0f) rotate(-90)" text-anchor="middle">completed per second</text>`+"\n", topY+topH/2)
	for _, v := range ticks(maxRate) {
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#dddddd"/>`+"\n", left, width-right, yRate(v), yRate(v))
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end" font-size="10">%g</text>`+"\n", left-4, yRate(v)+3, v)
	}
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#bbbbbb" stroke-dasharray="2,3"/>`+"\n", x(0), yRate(0), x(maxRate), yRate(maxRate))
	for _, bl := range []struct {
		name, color string
		rate        float64
	}{{"minimal workflow (the limit)", "#6a1b9a", r.MinimalPerSecond}, {"no-op workflow", "#1565c0", r.BaselinePerSecond}} {
		if bl.rate <= 0 {
			continue
		}
		at := yRate(bl.rate)
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="2" stroke-dasharray="8,4"/>`+"\n",
			left, width-right, at, at, bl.color)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" fill="%s">%s sustained %.1f workflows/s</text>`+"\n", left+6, at-5, bl.color, bl.name, bl.rate)
	}
	polyline(&b, r.Steps, "#2e7d32", func(s Step) (float64, float64) { return x(s.Offered), yRate(s.Throughput) })
	if len(r.APISteps) > 0 {
		polyline(&b, r.APISteps, apiColor, func(s Step) (float64, float64) { return x(s.Offered), yRate(s.Throughput) })
	}

	// Lower panel: p99, with the sustain bar.
	fmt.Fprintf(&b, `<text transform="translate(16,%.0f) rotate(-90)" text-anchor="middle">p99 to final status</text>`+"\n", lowY+lowH/2)
	low.MsGrid(&b, left-4, "end")
	bar := low.Y(float64(sustainP99.Milliseconds()))
	fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#c62828" stroke-dasharray="6,3"/>`+"\n", left, width-right, bar, bar)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" fill="#c62828" text-anchor="end">sustained below %s</text>`+"\n", width-right-4, bar-4, sustainP99)
	polyline(&b, r.Steps, "#ef6c00", func(s Step) (float64, float64) { return x(s.Offered), low.Y(s.Latency.P99) })
	if len(r.APISteps) > 0 {
		polyline(&b, r.APISteps, apiColor, func(s Step) (float64, float64) { return x(s.Offered), low.Y(s.Latency.P99) })
	}

	for _, v := range ticks(maxRate) {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle" font-size="10">%g/s</text>`+"\n", x(v), lowY+lowH+16, v)
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">offered orders per second (open loop)</text>`+"\n", left+(width-left-right)/2, lowY+lowH+36)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="10">%d CPUs, load average %s before, %s after</text>`+"\n", left, height-10,
		r.Machine.CPUs, r.Machine.LoadBefore, r.Machine.LoadAfter)
	b.WriteString("</svg>\n")
	return b.String()
}

// apiColor draws the API's steps.
const apiColor = "#6a1b9a"

// polyline joins the steps' points; a step not sustained is a hollow dot.
func polyline(b *strings.Builder, steps []Step, color string, at func(Step) (float64, float64)) {
	pts := make([]string, 0, len(steps))
	for _, s := range steps {
		px, py := at(s)
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", px, py))
	}
	fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), color)
	for _, s := range steps {
		px, py := at(s)
		fill := color
		if !s.Sustained {
			fill = "#ffffff"
		}
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s" stroke="%s" stroke-width="2"><title>%g/s offered: %.1f/s, p99 %.0f ms</title></circle>`+"\n",
			px, py, fill, color, s.Offered, s.Throughput, s.Latency.P99)
	}
}

// ticks are round values from 0 to most.
func ticks(most float64) []float64 {
	step := 1.0
	for _, s := range []float64{1, 2, 5, 10, 20, 50, 100} {
		step = s
		if most/s <= 10 {
			break
		}
	}
	var out []float64
	for v := 0.0; v <= most; v += step {
		out = append(out, v)
	}
	return out
}
