package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/sony/gobreaker/v2"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/ids"
	"github.com/payguard/payguard/internal/promtext"
	"github.com/payguard/payguard/worker/metrics"
	"github.com/payguard/payguard/workflows"
)

// LoadConfig is one load run.
type LoadConfig struct {
	Rate        float64       // orders per second
	Duration    time.Duration // how long orders are launched
	Products    []string      // round-robin
	Order       OrderFlags    // quantity, amount, card, deadline of each order
	WaitTimeout time.Duration // how long to wait for final statuses after the last launch
	MetricsURL  string        // the worker's /metrics, watched for breaker changes ("" to skip)
	TaskQueue   string
	IDPrefix    string
	// OnBreakerChange, when set, hears each breaker change as it is seen.
	OnBreakerChange func(BreakerChange)
	// BeganAt, when set, is time zero of the run's offsets.
	BeganAt time.Time
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

// LoadSummary is what `load` prints at the end.
type LoadSummary struct {
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

func runLoad(ctx context.Context, args []string, env Env) error {
	c := newCommand("load", env)
	var cfg LoadConfig
	cfg.Order.register(c)
	c.fs.Float64Var(&cfg.Rate, "rate", 0, "orders per second (required)")
	c.fs.DurationVar(&cfg.Duration, "duration", 0, "how long to launch orders (required)")
	products := c.fs.String("products", "P1", "comma-separated product ids, used in turn")
	stock := c.fs.Int64("stock", -1, "set each product's total stock to this first (default: leave it)")
	c.fs.DurationVar(&cfg.WaitTimeout, "wait-timeout", 0, "how long to wait for final statuses after the last launch (default: deadline + 1m)")
	c.fs.StringVar(&cfg.MetricsURL, "metrics-url", config.DefaultMetricsURL, "the worker's metrics, watched for breaker changes (\"\" to skip)")
	if err := c.parse(args, 0); err != nil {
		return err
	}
	// The load has a default amount where a single order demands one; an
	// amount given explicitly is validated like any order's.
	amountSet := false
	c.fs.Visit(func(f *flag.Flag) { amountSet = amountSet || f.Name == "amount" })
	if !amountSet {
		cfg.Order.Amount = 5000
	}
	cfg.Products = splitList(*products)
	cfg.TaskQueue = c.common.TaskQueue
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	if *stock >= 0 {
		st, err := c.openStore(ctx)
		if err != nil {
			return err
		}
		for _, p := range cfg.Products {
			if _, err := st.SetStock(ctx, p, *stock); err != nil {
				st.Close()
				return fmt.Errorf("load: set stock of %s: %v", p, err)
			}
		}
		st.Close()
	}
	cl, err := c.dialTemporal(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	summary := RunLoad(ctx, cl, cfg, env.Stderr)
	if c.json {
		return c.print(summary, "")
	}
	summary.Orders = nil
	return c.print(nil, summary.Table())
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Validate checks the run and fills in defaults.
func (cfg *LoadConfig) Validate() error {
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
		cfg.IDPrefix = newOrderID()
	}
	// The last order's id is the longest: if it follows the rule, all do.
	if err := ids.CheckOrder(loadOrderID(cfg.IDPrefix, cfg.total())); err != nil {
		return fmt.Errorf("order ids of this run: %w", err)
	}
	return cfg.Order.validate()
}

// total is how many orders the run launches.
func (cfg *LoadConfig) total() int { return int(math.Ceil(cfg.Rate * cfg.Duration.Seconds())) }

// loadOrderID names the run's nth order (from 1).
func loadOrderID(prefix string, n int) string { return fmt.Sprintf("%s-%05d", prefix, n) }

// RunLoad launches orders at a steady rate, shows a live progress line on
// progress, waits for their final statuses and sums up.
func RunLoad(ctx context.Context, cl client.Client, cfg LoadConfig, progress io.Writer) LoadSummary {
	began := cfg.BeganAt
	if began.IsZero() {
		began = time.Now()
	}
	s := LoadSummary{Rate: cfg.Rate, DurationSec: cfg.Duration.Seconds(), Final: map[string]int{}, BeganAt: began}
	var mu sync.Mutex
	var wg sync.WaitGroup
	watchCtx, stopWatch := context.WithCancel(ctx)
	breaker := &breakerWatch{url: cfg.MetricsURL, began: began, state: gobreaker.StateClosed.String(), notify: cfg.OnBreakerChange}
	watchDone := make(chan struct{})
	go func() { defer close(watchDone); breaker.run(watchCtx) }()

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
		f := cfg.Order
		f.Product = cfg.Products[i%len(cfg.Products)]
		id := loadOrderID(cfg.IDPrefix, i+1)
		sample := OrderSample{OrderID: id, StartOffset: time.Since(began).Seconds(), BreakerAtFire: breaker.current()}
		idx := len(s.Orders)
		mu.Lock()
		s.Orders = append(s.Orders, sample)
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			run, err := startOrder(ctx, cl, cfg.TaskQueue, f.input(id))
			startMs := float64(time.Since(start).Microseconds()) / 1000
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
			err = run.Get(waitCtx, &st)
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
				s.Orders[idx].FinalMillis = float64(time.Since(start).Microseconds()) / 1000
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	stopProgress()
	stopWatch()
	<-watchDone
	s.BreakerChanges = breaker.changes()
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

// startProgress redraws one status line every half second until stopped;
// where w is not a terminal it prints a plain line every five seconds.
func startProgress(w io.Writer, line func() string) func() {
	if w == nil {
		return func() {}
	}
	every, redraw := 500*time.Millisecond, true
	if !IsTerminal(w) {
		every, redraw = 5*time.Second, false
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				if redraw {
					fmt.Fprintf(w, "\r\033[K%s\n", line())
				} else {
					fmt.Fprintln(w, line())
				}
				return
			case <-t.C:
				if redraw {
					fmt.Fprintf(w, "\r\033[K%s", line())
				} else {
					fmt.Fprintln(w, line())
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// IsTerminal reports whether w is a terminal, where a line can be redrawn.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

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
func (s LoadSummary) Table() string {
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
		fmt.Fprintf(w, "  breaker_change\tT+%.1fs\t%s -> %s\t(%s)\n", c.Offset, c.From, c.To, c.Breaker)
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

// breakerWatch follows payguard_breaker_transitions_total on the worker's
// /metrics and turns each increment into a timed change.
type breakerWatch struct {
	url    string
	began  time.Time
	mu     sync.Mutex
	state  string
	seen   map[string]float64
	list   []BreakerChange
	notify func(BreakerChange)
}

func (b *breakerWatch) current() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

func (b *breakerWatch) changes() []BreakerChange {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.list)
}

func (b *breakerWatch) run(ctx context.Context) {
	if b.url == "" {
		return
	}
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	b.scrape(ctx, true)
	for {
		select {
		case <-ctx.Done():
			b.scrape(context.Background(), false)
			return
		case <-t.C:
			b.scrape(ctx, false)
		}
	}
}

func (b *breakerWatch) scrape(ctx context.Context, baseline bool) {
	counts, err := ScrapeBreakerTransitions(ctx, b.url)
	if err != nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen == nil {
		b.seen = map[string]float64{}
	}
	now := time.Now()
	var fresh []BreakerChange
	for key, n := range counts {
		if !baseline && n > b.seen[key] {
			parts := strings.SplitN(key, "|", 3)
			for range int(n - b.seen[key]) {
				fresh = append(fresh, BreakerChange{At: now, Offset: round(now.Sub(b.began).Seconds()), Breaker: parts[0], From: parts[1], To: parts[2]})
			}
		}
		b.seen[key] = n
	}
	// Several changes within one scrape: order them along the state machine.
	sort.SliceStable(fresh, func(i, j int) bool { return fresh[j].From == fresh[i].To })
	for _, c := range fresh {
		b.list = append(b.list, c)
		b.state = c.To
		if b.notify != nil {
			b.notify(c)
		}
	}
}

// ScrapeBreakerTransitions reads the breaker transition counters from a
// Prometheus text endpoint, keyed "breaker|from|to".
func ScrapeBreakerTransitions(ctx context.Context, url string) (map[string]float64, error) {
	samples, err := promtext.Scrape(ctx, url, metrics.BreakerTransitions)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, s := range samples {
		out[s.Labels["breaker"]+"|"+s.Labels["from"]+"|"+s.Labels["to"]] = s.Value
	}
	return out, nil
}
