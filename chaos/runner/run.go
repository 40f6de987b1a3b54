// Package runner is `go run ./chaos`: it starts the stack, runs orders
// through a seeded schedule of faults, heals, waits for every order to
// end, and hands the three books to the checker.
package runner

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/payguard/payguard/chaos/check"
	"github.com/payguard/payguard/chaos/stack"
	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/internal/devserver"
	"github.com/payguard/payguard/internal/exitcode"
	"github.com/payguard/payguard/internal/temporalserver"
	"github.com/payguard/payguard/loadgen"
)

// ErrViolations is returned, reported already, when any invariant was
// violated (exit 1).
var ErrViolations = errors.New("invariants violated")

// Options of one chaos run.
type Options struct {
	Seed          uint64
	Duration      time.Duration
	Rate          float64
	OrderDeadline time.Duration
	Settle        time.Duration
	Out           string
	Bin           string
	KeepDB        bool
	// IdempotencyKeys runs the workers with --idempotency-keys: creates are
	// retried under the order's key, and I2 then checks one side effect per
	// key (one key per order: still at most one transaction per order).
	IdempotencyKeys bool
	// Temporal is which Temporal the stack runs on (--temporal).
	Temporal temporalserver.Kind
}

func parse(args []string, getenv func(string) string, usage io.Writer) (Options, error) {
	fs, o := newFlagSet()
	fs.SetOutput(usage)
	if err := config.Parse(fs, args, getenv); err != nil {
		return *o, err
	}
	return *o, exitcode.UsageError(o.validate())
}

func (o *Options) validate() error {
	switch {
	case o.Duration < 10*time.Second:
		return fmt.Errorf("--duration must be at least 10s, got %s", o.Duration)
	case o.Rate <= 0 || o.Rate > 50 || math.IsNaN(o.Rate):
		return fmt.Errorf("--rate must be within (0, 50], got %v", o.Rate)
	case o.OrderDeadline <= 0 || o.Settle <= 0:
		return errors.New("--order-deadline and --settle must be positive")
	}
	return nil
}

// FlagSet is the chaos command's flag set as it reads it, unparsed
// (docs/configuration.md is generated from it).
func FlagSet() *flag.FlagSet {
	fs, _ := newFlagSet()
	return fs
}

// newFlagSet registers the chaos command's flags over fresh Options.
func newFlagSet() (*flag.FlagSet, *Options) {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	var o Options
	fs.Uint64Var(&o.Seed, "seed", 1, "the schedule's seed: the same seed replays the same faults at the same offsets")
	fs.DurationVar(&o.Duration, "duration", time.Minute, "how long orders are placed and faults injected")
	fs.Float64Var(&o.Rate, "rate", 2, "orders per second")
	fs.DurationVar(&o.OrderDeadline, "order-deadline", 30*time.Second, "each order's deadline (an order whose outcome stays unknown ends then)")
	fs.DurationVar(&o.Settle, "settle", 3*time.Minute, "after healing, how long every order may take to reach a final status")
	fs.StringVar(&o.Out, "out", "chaos-out", "where the logs, report.json and timeline.svg go")
	fs.StringVar(&o.Bin, "bin", "bin", "where the pgsim and worker binaries are (make build)")
	fs.BoolVar(&o.KeepDB, "keep-db", false, "keep the run's database even when the run is clean")
	fs.BoolVar(&o.IdempotencyKeys, "idempotency-keys", false, "run the workers with --idempotency-keys (pgsim honours keys)")
	o.Temporal = temporalserver.KindDev
	fs.Var(&o.Temporal, "temporal", temporalserver.KindFlagUsage)
	return fs, &o
}

// Products the orders buy, in turn.
var products = []string{"P1", "P2", "P3"}

// Run is the chaos command's main; usage goes to stderr. Broken books
// are told in the report and come back as ErrViolations, marked reported.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parse(args, getenv, stderr)
	if err != nil {
		return err
	}
	say := func(format string, a ...any) { fmt.Fprintf(stdout, "chaos: "+format+"\n", a...) }
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return err
	}
	temporalCLI, err := devserver.TemporalCLI()
	if err != nil {
		return err
	}
	const secret = "chaos-secret"
	say("seed %d: starting PostgreSQL database, %s, pgsim and 2 workers behind fault proxies...", o.Seed, temporalName(o.Temporal))
	st, err := stack.Start(ctx, stack.Options{
		Bin: o.Bin, TemporalCLI: temporalCLI, Out: o.Out, AdminDBURL: devserver.AdminDatabaseURL(), Secret: secret, Workers: 2,
		DatabaseName: fmt.Sprintf("payguard_chaos_%d_%d", o.Seed, time.Now().Unix()),
		// A calm gateway: faults come from the schedule, not the baseline.
		PgsimArgs: []string{"--seed", fmt.Sprint(o.Seed), "--latency-min", "10ms", "--latency-max", "80ms",
			"--create-error-rate", "0.05", "--processing-min", "300ms", "--processing-max", "2s", "--success-rate", "0.75"},
		WorkerArgs: workerArgs(o),
		Temporal:   o.Temporal,
	})
	if err != nil {
		return err
	}
	clean := false
	defer func() {
		st.Stop(clean && !o.KeepDB)
		if !clean || o.KeepDB {
			say("database kept for diagnosis: %s", st.DBURL)
		}
	}()
	db, err := st.OpenStore(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.SetStocks(ctx, products, 1_000_000); err != nil {
		return err
	}
	base, err := getFaults(ctx, st.Pgsim.AdminURL)
	if err != nil {
		return err
	}
	tm, err := timings(workerArgs(o), base)
	if err != nil {
		return err
	}
	plan := Plan(o.Seed, o.Duration, st.Links.Names(), len(st.Workers))
	say("stack up; %d faults planned over %s at %.1f orders/s", len(plan), o.Duration, o.Rate)

	began := time.Now()
	load := loadgen.Config{Rate: o.Rate, Duration: o.Duration, Products: products, TaskQueue: config.DefaultTaskQueue,
		IDPrefix: fmt.Sprintf("chaos-%d", o.Seed), BeganAt: began, WaitTimeout: o.OrderDeadline + o.Settle,
		Order: loadgen.Order{Qty: 1, Amount: 5000, User: "chaos-user", CardType: "SAMSUNG", CardNo: "1234-5678-9814-1451", Deadline: o.OrderDeadline}}
	if err := load.Validate(); err != nil {
		return err
	}
	total := int(math.Ceil(o.Rate * o.Duration.Seconds()))
	loadDone := make(chan loadgen.Summary, 1)
	go func() { loadDone <- loadgen.Run(ctx, st.Client, load, stdout) }()

	tr := &traffic{st: st, cl: st.Client, secret: []byte(secret), rng: rand.New(rand.NewPCG(o.Seed, 2)),
		orderID: func(i int) string { return fmt.Sprintf("%s-%05d", load.IDPrefix, i+1) },
		placed:  func() int { return min(total, int(time.Since(began).Seconds()*o.Rate)) }}
	trafficCtx, stopTraffic := context.WithTimeout(ctx, o.Duration)
	trafficDone := make(chan struct{})
	go func() { defer close(trafficDone); tr.run(trafficCtx, 2*time.Second) }()

	in := &injector{st: st, base: base, rng: rand.New(rand.NewPCG(o.Seed, 1)), log: say}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range plan {
		wg.Go(func() {
			f := plan[i]
			if !sleepUntil(ctx, began.Add(seconds(f.At))) {
				return
			}
			say("T+%5.1fs %s %s %s (for %.1fs)", time.Since(began).Seconds(), f.ID, f.Kind, f.Target, f.For)
			heal, err := in.apply(ctx, f)
			mu.Lock()
			plan[i].Applied, plan[i].Error = err == nil, errString(err)
			mu.Unlock()
			if err != nil {
				say("%s %s: %v", f.ID, f.Kind, err)
				return
			}
			if heal != nil {
				sleepUntil(ctx, began.Add(seconds(f.At+f.For)))
				heal()
			}
			mu.Lock()
			plan[i].EndedAt = round1(time.Since(began).Seconds())
			mu.Unlock()
		})
	}
	<-trafficDone
	stopTraffic()
	wg.Wait()
	say("T+%5.1fs every fault healed; waiting (at most %s) for every order to end", time.Since(began).Seconds(), load.WaitTimeout)
	if err := in.healAll(ctx); err != nil {
		return fmt.Errorf("heal: %w", err)
	}
	sum := <-loadDone
	ok := waitSettled(ctx, db, st.Client, st.Pgsim, o.Settle, say)
	books, err := collect(ctx, st, sum, tr)
	if err != nil {
		return err
	}
	books.BeganAt, books.Unreachable, books.LongEnough = began, unreachable(plan, began), check.LongEnough(tm)
	rep := buildReport(o, plan, sum, books, tr, ok, time.Since(began))
	rep.LongEnoughRule = tm.Explain()
	fmt.Fprint(stdout, rep.Text())
	raw, _ := json.MarshalIndent(rep, "", "  ")
	jsonPath, svgPath := filepath.Join(o.Out, "report.json"), filepath.Join(o.Out, "timeline.svg")
	if err := os.WriteFile(jsonPath, raw, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(svgPath, []byte(rep.SVG()), 0o644); err != nil {
		return err
	}
	say("report %s, timeline %s, logs %s/{temporal,pgsim,worker1,worker2}.log", jsonPath, svgPath, o.Out)
	if rep.Violations > 0 {
		say("%d violations; replay this run with: %s", rep.Violations, rep.Replay)
		return exitcode.Reported(ErrViolations)
	}
	clean = true
	return nil
}

// collect reads the three books once the run has settled.
func collect(ctx context.Context, st *stack.Stack, sum loadgen.Summary, tr *traffic) (check.Books, error) {
	var b check.Books
	s, err := st.OpenStore(ctx)
	if err != nil {
		return b, err
	}
	defer s.Close()
	if b.Orders, b.Products, err = readDatabase(ctx, s); err != nil {
		return b, fmt.Errorf("database book: %w", err)
	}
	if b.Outcomes, err = readOutcomes(ctx, s, b.Orders); err != nil {
		return b, fmt.Errorf("database book: %w", err)
	}
	if b.Gateway, err = readGateway(ctx, st.Pgsim); err != nil {
		return b, fmt.Errorf("gateway book: %w", err)
	}
	for _, o := range sum.Orders {
		if o.StartError == "" {
			b.Launched = append(b.Launched, o.OrderID)
		}
	}
	ids := slices.Clone(b.Launched)
	for id := range b.Orders {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if b.Workflows, b.StillRunning, err = readTemporal(ctx, st.Client, slices.Compact(ids)); err != nil {
		return b, fmt.Errorf("temporal book: %w", err)
	}
	if b.Replays, err = replayAll(ctx, st.Client, st.Temporal.CodecKeys); err != nil {
		return b, fmt.Errorf("replays: %w", err)
	}
	tr.mu.Lock()
	b.Forged = slices.Clone(tr.forged)
	tr.mu.Unlock()
	return b, nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// sleepUntil waits for a moment of the fault schedule; false if ctx ended.
func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// temporalName names the run's Temporal in what it says.
func temporalName(k temporalserver.Kind) string {
	if k == temporalserver.KindServer {
		return "Temporal server on PostgreSQL"
	}
	return "Temporal dev server"
}
