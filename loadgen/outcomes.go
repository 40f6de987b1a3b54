package loadgen

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/payguard/payguard/store"
)

// MaxLostExamples bounds the lost order ids a report lists.
const MaxLostExamples = 10

// Outcomes sums up how orders ended, by the database's account
// (store.Outcomes holds the one definition of a lost order). The demo,
// chaos and the bench all report it.
type Outcomes struct {
	Orders int `json:"orders"` // the orders the database holds
	Final  int `json:"final"`  // of them, final
	Lost   int `json:"lost"`
	// LostByKind counts lost orders per kind (store.LostKinds), every kind
	// present.
	LostByKind   map[string]int `json:"lostByKind"`
	LostExamples []string       `json:"lostExamples,omitempty"` // the first few lost ids, by id
	// FinalLatency is placed → final status (ms), over the final orders.
	FinalLatency Percentiles `json:"finalStatusLatency"`
}

// SumOutcomes sums outcomes up.
func SumOutcomes(outs []store.Outcome) Outcomes {
	o := Outcomes{Orders: len(outs), LostByKind: map[string]int{}}
	for _, k := range store.LostKinds {
		o.LostByKind[k] = 0
	}
	var ms []float64
	for _, out := range outs {
		if out.Final() {
			o.Final++
			ms = append(ms, millis(out.ToFinal()))
		}
		if out.Lost != "" {
			o.Lost++
			o.LostByKind[out.Lost]++
			if len(o.LostExamples) < MaxLostExamples {
				o.LostExamples = append(o.LostExamples, out.OrderID)
			}
		}
	}
	o.FinalLatency = Latencies(ms)
	return o
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// LostLine is the lost orders in words: "3 of 120 (cancelled 2, refunded 1)".
func (o Outcomes) LostLine() string {
	parts := make([]string, 0, len(store.LostKinds))
	for _, k := range store.LostKinds {
		parts = append(parts, fmt.Sprintf("%s %d", k, o.LostByKind[k]))
	}
	return fmt.Sprintf("%d of %d (%s)", o.Lost, o.Orders, strings.Join(parts, ", "))
}

// LatencyLine is the final-status latency in words.
func (o Outcomes) LatencyLine() string {
	return LatencyLine(o.FinalLatency)
}

// LatencyLine is p50 and p95 of p in words, with the count.
func LatencyLine(p Percentiles) string {
	if p.Count == 0 {
		return "no orders"
	}
	return fmt.Sprintf("p50 %.0f ms, p95 %.0f ms (%d orders)", p.P50, p.P95, p.Count)
}

// OrderIDs are the ids of the orders the run started.
func (s Summary) OrderIDs() []string {
	ids := make([]string, 0, len(s.Orders))
	for _, o := range s.Orders {
		if o.StartError == "" {
			ids = append(ids, o.OrderID)
		}
	}
	return ids
}

// ReadOutcomes reads the outcomes of the run's orders from the database.
func (s Summary) ReadOutcomes(ctx context.Context, st *store.Store) ([]store.Outcome, error) {
	return st.Outcomes(ctx, s.OrderIDs())
}
