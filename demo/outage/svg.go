package outage

import (
	"fmt"
	"html"
	"math"
	"strings"

	"github.com/payguard/payguard/loadgen"
)

// stateColors follow the Grafana panel of the article.
var stateColors = map[string]string{"closed": "#2e7d32", "open": "#c62828", "half-open": "#f9a825"}

var finalColors = map[string]string{"CONFIRMED": "#2e7d32", "FAILED": "#6a1b9a", "CANCELLED": "#ef6c00",
	"REJECTED": "#455a64", "UNFINISHED": "#000000", "ERROR": "#000000", "NOT_STARTED": "#c62828"}

// SVG draws the run: the gateway's outage and the breaker's state on top,
// each order's time to its final status (log scale) below.
func (r Report) SVG() string {
	const (
		width, left, right = 1000.0, 70.0, 20.0
		bandTop, bandH     = 62.0, 40.0
		plotTop, plotH     = 160.0, 240.0
		height             = 470.0
	)
	span := math.Max(r.DurationSeconds, 1) * 1.05
	for _, o := range r.Orders {
		span = math.Max(span, o.StartOffset*1.05)
	}
	plot := OrderPlot{Left: left, Right: right, Width: width, Top: plotTop, Height: plotH, Span: span}
	x := plot.X
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="24" font-size="16" font-weight="bold">payguard outage demo: %.1f orders/s for %.0f s, %d of %d orders lost</text>`+"\n",
		left, r.Rate, r.DurationSeconds, r.Outcomes.Lost, r.Outcomes.Orders)

	// Breaker state band.
	fmt.Fprintf(&b, `<text x="8" y="%.0f">breaker</text>`+"\n", bandTop+bandH/2+4)
	state, from := "closed", 0.0
	band := r.lookupChanges()
	for _, c := range band {
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.0f" width="%.1f" height="%.0f" fill="%s"/>`+"\n", x(from), bandTop, math.Max(x(c.Offset)-x(from), 0.5), bandH, stateColors[state])
		state, from = c.To, c.Offset
	}
	fmt.Fprintf(&b, `<rect x="%.1f" y="%.0f" width="%.1f" height="%.0f" fill="%s"/>`+"\n", x(from), bandTop, math.Max(x(span)-x(from), 0.5), bandH, stateColors[state])
	lastLabel, row := -1000.0, 0
	for _, c := range band {
		// Changes close together get their labels on alternate rows.
		if x(c.Offset)-lastLabel < 70 {
			row = 1 - row
		} else {
			row = 0
		}
		lastLabel = x(c.Offset)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" font-size="10">%s</text>`+"\n", x(c.Offset)+2, bandTop-4-12*float64(row), strings.ToUpper(c.To))
	}

	// Gateway outage, shaded over both panels.
	var downAt *float64
	for _, e := range r.Gateway {
		v := e.Offset
		if e.Down {
			downAt = &v
			continue
		}
		if downAt != nil {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.0f" width="%.1f" height="%.0f" fill="#000000" fill-opacity="0.08"/>`+"\n", x(*downAt), bandTop-20, x(v)-x(*downAt), plotTop+plotH-bandTop+20)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" font-size="11">gateway down</text>`+"\n", x(*downAt)+4, plotTop+14)
			downAt = nil
		}
	}

	plot.Draw(&b, r.Orders)
	lx := FinalLegend(&b, left, height-30)
	for _, k := range []string{"closed", "open", "half-open"} {
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="10" height="10" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`+"\n", lx, height-35, stateColors[k], lx+14, height-26, strings.ToUpper(k))
		lx += 100
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// OrderPlot is the picture's lower panel: each order's time to its final
// status (log scale) by when it was placed. The chaos run draws the same.
type OrderPlot struct {
	Left, Right, Width float64 // the picture's width and margins
	Top, Height        float64 // the panel's place
	Span               float64 // seconds the x axis covers
}

// X is the x coordinate of an offset in seconds.
func (p OrderPlot) X(sec float64) float64 { return p.Left + (p.Width-p.Left-p.Right)*sec/p.Span }

const plotMinMs, plotMaxMs = 10.0, 100_000.0

// Y is the y coordinate of a time in milliseconds on the panel's log scale
// (10 ms to 100 s); the benchmark's p99 axis uses the same scale.
func (p OrderPlot) Y(ms float64) float64 {
	ms = math.Min(math.Max(ms, plotMinMs), plotMaxMs)
	return p.Top + p.Height - p.Height*(math.Log10(ms)-math.Log10(plotMinMs))/(math.Log10(plotMaxMs)-math.Log10(plotMinMs))
}

// Draw writes the panel: grid, one dot per order, the time axis.
func (p OrderPlot) Draw(b *strings.Builder, orders []loadgen.OrderSample) {
	fmt.Fprintf(b, `<text transform="translate(16,%.0f) rotate(-90)" text-anchor="middle">time to final status</text>`+"\n", p.Top+p.Height/2)
	p.MsGrid(b, p.Left-4, "end")
	for _, o := range orders {
		ms := o.FinalMillis
		if ms == 0 {
			ms = plotMaxMs
		}
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s" fill-opacity="0.8"><title>%s %s %.0f ms</title></circle>`+"\n",
			p.X(o.StartOffset), p.Y(ms), colorOf(o.Final), html.EscapeString(o.OrderID), o.Final, o.FinalMillis)
	}
	for sec := 0.0; sec <= p.Span; sec += tick(p.Span) {
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f" text-anchor="middle" font-size="10">%.0fs</text>`+"\n", p.X(sec), p.Top+p.Height+16, sec)
	}
}

// MsGrid writes the log scale's grid lines, labelled at x (anchored
// "start" or "end").
func (p OrderPlot) MsGrid(b *strings.Builder, x float64, anchor string) {
	for _, ms := range []float64{10, 100, 1000, 10000, 100000} {
		fmt.Fprintf(b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#dddddd"/>`+"\n", p.Left, p.Width-p.Right, p.Y(ms), p.Y(ms))
		fmt.Fprintf(b, `<text x="%.0f" y="%.1f" text-anchor="%s" font-size="10">%s</text>`+"\n", x, p.Y(ms)+3, anchor, MsLabel(ms))
	}
}

// FinalLegend writes the final statuses' colours at (x, y) and returns
// where the next legend entry goes.
func FinalLegend(b *strings.Builder, x, y float64) float64 {
	for _, k := range []string{"CONFIRMED", "FAILED", "CANCELLED", "REJECTED", "UNFINISHED"} {
		fmt.Fprintf(b, `<circle cx="%.0f" cy="%.0f" r="4" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`+"\n", x, y, finalColors[k], x+8, y+4, k)
		x += 110
	}
	return x
}

func colorOf(final string) string {
	if c, ok := finalColors[final]; ok {
		return c
	}
	return "#000000"
}

// MsLabel writes a time in milliseconds as an axis label: 10ms, 1s.
func MsLabel(ms float64) string {
	if ms >= 1000 {
		return fmt.Sprintf("%.0fs", ms/1000)
	}
	return fmt.Sprintf("%.0fms", ms)
}

func tick(span float64) float64 {
	for _, t := range []float64{1, 2, 5, 10, 15, 30, 60, 120} {
		if span/t <= 12 {
			return t
		}
	}
	return 300
}
