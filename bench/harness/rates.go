package harness

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/loadgen"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/workflows"
)

// sustainP99 is the slowest p99 time to final status a sustained rate may
// have (the bar).
const sustainP99 = 2 * time.Second

// warmFor bounds the warm-up's wait for a first confirmed order: a stack
// that confirms none in a minute is broken, and the steps will say so.
const warmFor = time.Minute

// Step is one open-loop rate of the payguard phase.
type Step struct {
	Offered     float64             `json:"offeredPerSecond"`
	DurationSec float64             `json:"durationSeconds"`
	Launched    int                 `json:"launched"`
	Final       map[string]int      `json:"final"`
	Throughput  float64             `json:"confirmedPerSecond"` // CONFIRMED orders over first launch to last final status
	Latency     loadgen.Percentiles `json:"finalLatency"`
	// FirstAnswer is each order's first answer: its workflow started
	// (payguard's steps) or POST /api/v1/orders answered (the API's).
	FirstAnswer loadgen.Percentiles `json:"firstAnswerLatency"`
	Sustained   bool                `json:"sustained"`
	Why         string              `json:"why,omitempty"` // why not sustained
	CPU         CPUCost             `json:"cpuPerOrder"`   // over the step, per order launched
	// Outcomes are the step's lost orders and final-status latency by the
	// database's account, read once the step's wait is over.
	Outcomes loadgen.Outcomes `json:"outcomes"`
}

// products are the bench's stock, set far above any run's demand.
var products = []string{"BENCH1", "BENCH2", "BENCH3"}

// benchOrder is every bench order: a card pgsim takes, a deadline far past
// any step.
func benchOrder(deadline time.Duration) loadgen.Order {
	return loadgen.Order{Qty: 1, Amount: 1000, User: "bench", CardType: "SAMSUNG", CardNo: "1234-5678-9814-1451", Deadline: deadline}
}

// place places one order; nil is the starter's `load` path (the workflow
// started with the Temporal client), the API's apiServer.place the HTTP one.
type place = func(context.Context, workflows.PaymentInput) error

// runStep places orders at rate for d through loadgen (the starter's
// `load` path, or through place when it is set) and judges the step:
// sustained when every order is CONFIRMED with p99 under sustainP99, none
// still running sustainP99 after the last launch (completions keep up).
// The API's steps are judged by the same rule: only how each order is
// placed differs.
func runStep(ctx context.Context, cl client.Client, rate float64, d time.Duration, via place, progress io.Writer) (Step, loadgen.Summary) {
	cfg := loadgen.Config{Rate: rate, Duration: d, Products: products, Order: benchOrder(time.Hour),
		WaitTimeout: sustainP99, TaskQueue: config.DefaultTaskQueue, Place: via}
	if err := cfg.Validate(); err != nil {
		return Step{Offered: rate, Why: err.Error()}, loadgen.Summary{}
	}
	sum := loadgen.Run(ctx, cl, cfg, progress)
	s := Step{Offered: rate, DurationSec: d.Seconds(), Launched: len(sum.Orders), Final: sum.Final, Latency: sum.FinalLatency,
		FirstAnswer: sum.StartLatency}
	first, last := math.Inf(1), 0.0
	for _, o := range sum.Orders {
		first = math.Min(first, o.StartOffset)
		if o.FinalMillis > 0 {
			last = math.Max(last, o.StartOffset+o.FinalMillis/1000)
		}
	}
	confirmed := sum.Final[string(status.OrderConfirmed)]
	if last > first {
		s.Throughput = round2(float64(confirmed) / (last - first))
	}
	switch {
	case confirmed != s.Launched:
		s.Why = fmt.Sprintf("%d of %d orders CONFIRMED (%v)", confirmed, s.Launched, sum.Final)
		for _, o := range sum.Orders {
			if o.FinalError != "" || o.StartError != "" {
				s.Why += fmt.Sprintf("; order %s: %s%s", o.OrderID, o.StartError, o.FinalError)
				break
			}
		}
	case s.Latency.P99 >= float64(sustainP99.Milliseconds()):
		s.Why = fmt.Sprintf("p99 %.0f ms ≥ %s", s.Latency.P99, sustainP99)
	default:
		s.Sustained = true
	}
	return s, sum
}
