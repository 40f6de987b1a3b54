// Package loadgen places orders at a steady rate against a running stack,
// follows them to their final status and sums the run up: latency
// percentiles, final statuses and the lookup breaker's changes, read from the
// worker's metrics. The starter's `load` command, the outage demo and chaos
// all drive it.
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/payguard/payguard/ids"
	"github.com/payguard/payguard/workflows"
)

// Config is one load run.
type Config struct {
	Rate        float64       // orders per second
	Duration    time.Duration // how long orders are launched
	Products    []string      // round-robin
	Order       Order         // quantity, amount, card, deadline of each order
	WaitTimeout time.Duration // how long to wait for final statuses after the last launch
	MetricsURL  string        // the worker's /metrics, watched for breaker changes ("" to skip)
	// FleetMetricsURLs are the other workers' /metrics (several workers
	// sharing the fleet breaker): their breaker changes are listed too,
	// with BreakerChange.Worker naming the worker (worker-2, ...).
	FleetMetricsURLs []string
	TaskQueue        string
	IDPrefix         string
	// OnBreakerChange, when set, hears each breaker change as it is seen.
	OnBreakerChange func(BreakerChange)
	// BeganAt, when set, is time zero of the run's offsets.
	BeganAt time.Time
	// Place places one order, its first answer timed as the order's start;
	// nil starts its workflow on TaskQueue (StartOrder). Either way the
	// order is followed to its end through its workflow.
	Place func(ctx context.Context, in workflows.PaymentInput) error
}

// Where names the breaker and, in a fleet, the worker that saw the change.
func (c BreakerChange) Where() string {
	if c.Worker == "" {
		return c.Breaker
	}
	return c.Breaker + " @ " + c.Worker
}

// Percentiles are latency figures in milliseconds.
type Percentiles struct {
	Count int     `json:"count"`
	Avg   float64 `json:"avg"`
	Min   float64 `json:"min"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// BreakerChange is a breaker state change seen in the worker's metrics.
type BreakerChange struct {
	At      time.Time `json:"at"`
	Offset  float64   `json:"offsetSeconds"` // since the load began
	Breaker string    `json:"breaker"`
	From    string    `json:"from"`
	To      string    `json:"to"`
	// Worker is the worker that saw it: "" for the one at MetricsURL,
	// worker-N for FleetMetricsURLs[N-2].
	Worker string `json:"worker,omitempty"`
}

// OrderSample is one order of the run.
type OrderSample struct {
	OrderID       string  `json:"orderId"`
	StartOffset   float64 `json:"startOffsetSeconds"`
	StartMillis   float64 `json:"startMillis"`           // to the first answer (workflow started)
	FinalMillis   float64 `json:"finalMillis,omitempty"` // to the final status
	Final         string  `json:"final"`
	StartError    string  `json:"startError,omitempty"`
	FinalError    string  `json:"finalError,omitempty"` // why the wait for the final status failed (Final ERROR)
	BreakerAtFire string  `json:"breakerAtStart,omitempty"`
}

// Summary is a run's outcome: what the starter's `load` prints at the end,
// and what the demo and chaos report from.
type Summary struct {
	Rate           float64         `json:"rate"`
	DurationSec    float64         `json:"durationSeconds"`
	Started        int             `json:"started"`
	FailedToStart  int             `json:"failedToStart"`
	Final          map[string]int  `json:"final"`
	StartLatency   Percentiles     `json:"startLatency"`
	FinalLatency   Percentiles     `json:"finalLatency"`
	BreakerChanges []BreakerChange `json:"breakerChanges"`
	Orders         []OrderSample   `json:"orders"`
	BeganAt        time.Time       `json:"beganAt"`
}

// Validate checks the run and fills in defaults.
func (cfg *Config) Validate() error {
	switch {
	case cfg.Rate <= 0 || math.IsInf(cfg.Rate, 0) || math.IsNaN(cfg.Rate):
		return fmt.Errorf("--rate must be positive, got %v", cfg.Rate)
	case cfg.Rate > 1000:
		return fmt.Errorf("--rate above 1000/s is not supported, got %v", cfg.Rate)
	case cfg.Duration <= 0:
		return fmt.Errorf("--duration must be positive, got %s", cfg.Duration)
	case len(cfg.Products) == 0:
		return errors.New("--products must name at least one product")
	}
	for _, p := range cfg.Products {
		if err := ids.CheckProduct(p); err != nil {
			return fmt.Errorf("--products: %w", err)
		}
	}
	cfg.Order.Product = cfg.Products[0]
	if cfg.WaitTimeout <= 0 {
		cfg.WaitTimeout = cfg.Order.Deadline + time.Minute
	}
	if cfg.IDPrefix == "" {
		cfg.IDPrefix = NewOrderID()
	}
	// The first order's id is the shortest and the last's the longest: if
	// both follow the rule, all do.
	for _, n := range []int{1, cfg.total()} {
		if err := ids.CheckNewOrder(orderID(cfg.IDPrefix, n)); err != nil {
			return fmt.Errorf("order ids of this run: %w", err)
		}
	}
	return cfg.Order.Validate()
}

// total is how many orders the run launches.
func (cfg *Config) total() int { return int(math.Ceil(cfg.Rate * cfg.Duration.Seconds())) }

// Inputs are the run's orders in launch order, for a client that places
// them itself (the demo's --via vegeta); Validate first.
func (cfg *Config) Inputs() []workflows.PaymentInput {
	ins := make([]workflows.PaymentInput, cfg.total())
	for i := range ins {
		ins[i] = cfg.input(i)
	}
	return ins
}

// input is the run's order i (from 0): products round-robin.
func (cfg *Config) input(i int) workflows.PaymentInput {
	f := cfg.Order
	f.Product = cfg.Products[i%len(cfg.Products)]
	return f.Input(orderID(cfg.IDPrefix, i+1))
}

// orderID names the run's nth order (from 1).
func orderID(prefix string, n int) string { return fmt.Sprintf("%s-%05d", prefix, n) }

// Run launches orders at a steady rate, shows a live progress line on
// progress, waits for their final statuses and sums up.
func Run(ctx context.Context, cl client.Client, cfg Config, progress io.Writer) Summary {
	began := cfg.BeganAt
	if began.IsZero() {
		began = time.Now()
	}
	s := Summary{Rate: cfg.Rate, DurationSec: cfg.Duration.Seconds(), Final: map[string]int{}, BeganAt: began}
	var mu sync.Mutex
	var wg sync.WaitGroup
	watchCtx, stopWatch := context.WithCancel(ctx)
	breaker := &breakerWatch{url: cfg.MetricsURL, began: began, state: gobreaker.StateClosed.String(), notify: cfg.OnBreakerChange}
	watches := []*breakerWatch{breaker}
	for i, url := range cfg.FleetMetricsURLs {
		watches = append(watches, &breakerWatch{url: url, began: began, state: gobreaker.StateClosed.String(),
			notify: cfg.OnBreakerChange, worker: fmt.Sprintf("worker-%d", i+2)})
	}
	var watchers sync.WaitGroup
	for _, w := range watches {
		watchers.Add(1)
		go func() { defer watchers.Done(); w.run(watchCtx) }()
	}

	place := cfg.Place
	if place == nil {
		place = func(ctx context.Context, in workflows.PaymentInput) error {
			_, err := StartOrder(ctx, cl, cfg.TaskQueue, in)
			return err
		}
	}
	waitCtx, cancelWait := context.WithTimeout(ctx, cfg.Duration+cfg.WaitTimeout)
	defer cancelWait()
	total := cfg.total()
	interval := time.Duration(float64(time.Second) / cfg.Rate)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	stopProgress := startProgress(progress, func() string {
		mu.Lock()
		defer mu.Unlock()
		inFlight := s.Started - sumFinals(s.Final)
		return fmt.Sprintf("launched %d/%d  failed to start %d  in flight %d  %s  breaker %s  %.0fs",
			s.Started+s.FailedToStart, total, s.FailedToStart, inFlight, finalsLine(s.Final), breaker.current(), time.Since(began).Seconds())
	})

launch:
	for i := 0; i < total; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				break launch
			case <-ticker.C:
			}
		}
		in := cfg.input(i)
		id := in.OrderID
		sample := OrderSample{OrderID: id, StartOffset: time.Since(began).Seconds(), BreakerAtFire: breaker.current()}
		idx := len(s.Orders)
		mu.Lock()
		s.Orders = append(s.Orders, sample)
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			err := place(ctx, in)
			startMs := millis(time.Since(start))
			mu.Lock()
			s.Orders[idx].StartMillis = startMs
			if err != nil {
				s.FailedToStart++
				s.Orders[idx].StartError = err.Error()
				s.Orders[idx].Final = "NOT_STARTED"
				mu.Unlock()
				return
			}
			s.Started++
			mu.Unlock()
			var st workflows.State
			err = cl.GetWorkflow(waitCtx, workflows.PaymentWorkflowID(id), "").Get(waitCtx, &st)
			final := string(st.Status)
			var canceled *temporal.CanceledError
			switch {
			case errors.As(err, &canceled):
				final = "CANCELLED"
			case waitCtx.Err() != nil:
				final = "UNFINISHED"
			case err != nil:
				final = "ERROR"
			}
			mu.Lock()
			if final == "ERROR" {
				s.Orders[idx].FinalError = err.Error()
			}
			s.Final[final]++
			s.Orders[idx].Final = final
			if final != "UNFINISHED" {
				s.Orders[idx].FinalMillis = millis(time.Since(start))
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	stopProgress()
	stopWatch()
	watchers.Wait()
	for _, w := range watches {
		s.BreakerChanges = append(s.BreakerChanges, w.changes()...)
	}
	sort.SliceStable(s.BreakerChanges, func(i, j int) bool { return s.BreakerChanges[i].At.Before(s.BreakerChanges[j].At) })
	var starts, finals []float64
	for _, o := range s.Orders {
		if o.StartError == "" {
			starts = append(starts, o.StartMillis)
		}
		if o.FinalMillis > 0 {
			finals = append(finals, o.FinalMillis)
		}
	}
	s.StartLatency, s.FinalLatency = Latencies(starts), Latencies(finals)
	return s
}

func sumFinals(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func finalsLine(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, "  ")
}
