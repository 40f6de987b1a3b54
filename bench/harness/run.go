// Package harness is `make bench`: it starts its own stack (the tuned
// Temporal dev server, pgsim calm with immediate callbacks, one payguard
// worker, all connected directly, no fault proxies) and in one run on that
// server measures the no-op baseline, payguard's highest sustained order
// rate, their ratio, the memory and history of waiting orders, and the
// lookup breaker; and payguard's highest sustained rate through the HTTP
// order API (the api binary on the same stack) beside the direct one, by
// the same steps and rule. It writes a table, report.json and report.svg.
package harness

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/payguard/payguard/chaos/stack"
	"github.com/payguard/payguard/internal/devserver"
	"github.com/payguard/payguard/loadgen"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

// Options are the bench's flags.
type Options struct {
	Bin        string
	Out        string
	Quick      bool
	InFlight   int           // the baseline's closed loop
	Baseline   time.Duration // how long the baseline runs
	Rates      []float64     // payguard's open-loop steps, rising
	Refine     int           // bisections between the last sustained rate and the first not
	Step       time.Duration // each step's launch time
	Waiting    int           // orders left waiting in the capacity phase
	WorkerArgs []string      // extra worker flags (the levers under test)
	Phases     string        // which phases run
	Label      string        // names the run in the report (e.g. the lever)
	Eager      bool          // the dev server runs with devserver.EagerArgs
	Profile    bool          // save the worker's CPU profile of each rate step
}

// quick is the harness's smoke size: every phase, small and short.
func (o *Options) quick() {
	o.InFlight, o.Baseline, o.Rates, o.Step, o.Waiting, o.Refine = 4, 3*time.Second, []float64{2, 4}, 3*time.Second, 50, 0
}

func parseFlags(args []string, usage io.Writer) (Options, error) {
	fs, finish := newFlagSet()
	fs.SetOutput(usage)
	if err := fs.Parse(args); err != nil {
		return Options{}, err
	}
	if fs.NArg() > 0 {
		return Options{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return finish()
}

// FlagSet is the bench's flag set as it reads it, unparsed
// (docs/configuration.md is generated from it).
func FlagSet() *flag.FlagSet {
	fs, _ := newFlagSet()
	return fs
}

// newFlagSet registers the bench's flags over fresh Options; finish
// completes and validates them once the flags are parsed.
func newFlagSet() (fs *flag.FlagSet, finish func() (Options, error)) {
	fs = flag.NewFlagSet("bench", flag.ContinueOnError)
	var o Options
	var rates, workerArgs string
	var big bool
	fs.StringVar(&o.Bin, "bin", "bin", "directory holding the pgsim and worker binaries (make build)")
	fs.StringVar(&o.Out, "out", "bench-out", "where report.json, report.svg and the services' logs go")
	fs.BoolVar(&o.Quick, "quick", false, "smoke size: 4 in flight for 3 s, rates 2 and 4 for 3 s each, 50 waiting orders")
	fs.IntVar(&o.InFlight, "in-flight", 30, "no-op workflows kept in flight by the baseline's closed loop")
	fs.DurationVar(&o.Baseline, "baseline", 30*time.Second, "how long the baseline runs")
	fs.StringVar(&rates, "rates", "10,20,30,35,40,45,50,55,60", "payguard's open-loop rates (orders/s), rising; the steps stop at the first one not sustained")
	fs.IntVar(&o.Refine, "refine", 2, "after the first rate not sustained, this many more steps halve the gap to the last sustained one")
	fs.DurationVar(&o.Step, "step", 20*time.Second, "how long each rate launches orders")
	fs.IntVar(&o.Waiting, "waiting", 2000, "orders left waiting in the capacity phase")
	fs.BoolVar(&big, "waiting-10k", false, "leave 10 000 orders waiting (the memory target)")
	fs.StringVar(&workerArgs, "worker-args", "", "extra worker flags, space-separated (levers under test)")
	fs.StringVar(&o.Phases, "phases", "baseline,rates,api,breaker,capacity", "phases to run, comma-separated (api: the rates' steps through the HTTP order API, the api binary)")
	fs.BoolVar(&o.Eager, "eager", false, "start the dev server with eager activity execution and eager workflow start on")
	fs.BoolVar(&o.Profile, "profile", false, "save the worker's CPU profile of each rate step as worker-cpu-<rate>.pprof (worker-cpu-api-<rate>.pprof through the API) in --out")
	fs.StringVar(&o.Label, "label", "", "a name for this run in the report (e.g. the lever tried)")
	return fs, func() (Options, error) { return o.complete(rates, workerArgs, big) }
}

// complete fills in what the flags hold as text (the rates, the worker
// args, --waiting-10k) and validates the options.
func (o Options) complete(rates, workerArgs string, big bool) (Options, error) {
	for _, r := range strings.Split(rates, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(r), 64)
		if err != nil || v <= 0 || v > 1000 {
			return o, fmt.Errorf("--rates: %q is not a rate within (0, 1000]", r)
		}
		o.Rates = append(o.Rates, v)
	}
	if big {
		o.Waiting = 10_000
	}
	if o.Quick {
		o.quick()
	}
	o.WorkerArgs = strings.Fields(workerArgs)
	switch {
	case o.InFlight < 1 || o.Baseline <= 0 || o.Step <= 0:
		return o, errors.New("--in-flight, --baseline and --step must be positive")
	case o.Waiting < 1:
		return o, errors.New("--waiting must be at least 1")
	case o.Refine < 0 || o.Refine > 5:
		return o, fmt.Errorf("--refine must be within [0, 5], got %d", o.Refine)
	}
	for _, p := range strings.Split(o.Phases, ",") {
		if !strings.Contains(",baseline,rates,api,breaker,capacity,", ","+p+",") {
			return o, fmt.Errorf("--phases: unknown phase %q", p)
		}
	}
	return o, nil
}

func (o Options) has(phase string) bool { return strings.Contains(","+o.Phases+",", ","+phase+",") }

// calmPgsim: no injected faults, 20–50 ms to decide, every payment
// succeeds and its callback comes at once.
var calmPgsim = []string{"--latency-min", "0ms", "--latency-max", "0ms", "--create-error-rate", "0",
	"--processing-min", "20ms", "--processing-max", "50ms", "--success-rate", "1"}

// capacityRate is how fast the capacity phase starts its orders: what a
// dev server on a busy 2-core machine takes without refusing starts.
const capacityRate = 30

// Run is the bench's main.
func Run(ctx context.Context, args []string, stdout io.Writer) error {
	o, err := parseFlags(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	return run(ctx, o, stdout)
}

func run(ctx context.Context, o Options, stdout io.Writer) error {
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return err
	}
	cli, err := devserver.TemporalCLI()
	if err != nil {
		return err
	}
	say := func(format string, a ...any) { fmt.Fprintf(stdout, "bench: "+format+"\n", a...) }
	rep := Report{Label: o.Label, Machine: machine(), WorkerArgs: o.WorkerArgs, Quick: o.Quick, Eager: o.Eager}
	var temporalArgs []string
	if o.Eager {
		temporalArgs = devserver.EagerArgs
	}
	say("starting the stack (dev server, pgsim calm, one worker)... load average %s", rep.Machine.LoadBefore)
	st, err := stack.Start(ctx, stack.Options{
		Bin: o.Bin, TemporalCLI: cli, Out: o.Out, AdminDBURL: devserver.AdminDatabaseURL(), Secret: "bench-secret",
		Workers: 1, Direct: true, DatabaseName: fmt.Sprintf("payguard_bench_%d", time.Now().UnixNano()),
		PgsimArgs: calmPgsim, TemporalArgs: temporalArgs, WorkerArgs: append([]string{"--pprof", "--shutdown-timeout", "3s"}, o.WorkerArgs...),
	})
	if err != nil {
		return err
	}
	defer st.Stop(true)
	db, err := pgxpool.New(ctx, st.DBURL)
	if err != nil {
		return err
	}
	defer db.Close()
	ledger, err := st.OpenStore(ctx)
	if err != nil {
		return err
	}
	defer ledger.Close()
	if err := ledger.SetStocks(ctx, products, 100_000_000); err != nil {
		return err
	}
	w := st.Workers[0]
	cpu := cpuMeter{server: st.Temporal.CPUTime, worker: w.CPUTime, gateway: st.Pgsim.CPUTime}
	var api *apiServer
	if o.has("api") {
		say("starting the order API (%s) on the stack...", filepath.Join(o.Bin, "api"))
		if api, err = startAPI(ctx, o, st); err != nil {
			return fmt.Errorf("start the API: %w", err)
		}
		defer api.Stop()
	}

	// baseline runs the no-op phase on a worker of its own that stops
	// with it, so that the bench process does not serve no-op tasks while
	// payguard is timed.
	baseline := func(when string) (*Baseline, error) {
		nw, err := startNoopWorker(st.Client)
		if err != nil {
			return nil, err
		}
		defer nw.Stop()
		runBaseline(ctx, st.Client, 2, time.Second, "warm-noop-"+when)
		say("baseline %s: no-op workflow of %d activities, %d in flight for %s...", when, happyPathActivities, o.InFlight, o.Baseline)
		noopCPU := cpuMeter{server: st.Temporal.CPUTime} // the no-op worker is this process
		before := noopCPU.read()
		b := runBaseline(ctx, st.Client, o.InFlight, o.Baseline, "noop-"+strconv.FormatInt(time.Now().UnixNano(), 36))
		b.CPU = noopCPU.per(before, b.Completed)
		say("baseline %s: %.1f workflows/s, p50 %.0f ms, p99 %.0f ms, %d errors", when, b.PerSecond, b.Latency.P50, b.Latency.P99, b.Errors)
		return &b, nil
	}
	// warm takes payguard's paths up (connections, caches) before anything
	// is timed, and again after a restart of the dev server, until an
	// order of each path is confirmed: after a restart the worker's
	// pollers reconnect with a backoff, which no timed step may pay for.
	paths := []place{nil}
	if api != nil {
		paths = append(paths, api.place)
	}
	warm := func() {
		for _, via := range paths {
			start := time.Now()
			for {
				s, _ := runStep(ctx, st.Client, 5, time.Second, via, nil)
				if s.Final[string(status.OrderConfirmed)] > 0 || ctx.Err() != nil {
					break
				}
				if time.Since(start) > warmFor {
					say("no order confirmed while warming up for %s: timing anyway (%s)", warmFor, s.Why)
					break
				}
			}
		}
	}
	warm()

	if o.has("baseline") {
		if rep.Baseline, err = baseline("before"); err != nil {
			return err
		}
	}
	// A step not sustained overloads the dev server (its one SQLite
	// connection), and the server stays slower after that step's backlog
	// is done, which the next phase would pay for (design §11): the next
	// timed phase starts on the server restarted (same file, port and
	// flags) and payguard's path warmed up again.
	overloaded := false
	// settle waits for the dev server to go quiet before the next timed
	// phase (quiet.go), and says so when it did not.
	settle := func(before string) (time.Duration, error) {
		if overloaded {
			// The failed step's orders still running end on the server
			// that took them, before it is stopped.
			waitQuiet(ctx, st.Temporal.CPUTime)
			overloaded = false
			say("restarting the dev server after a step not sustained, before %s...", before)
			if err := st.Temporal.Restart(ctx); err != nil {
				return 0, fmt.Errorf("restart the dev server: %w", err)
			}
			rep.Restarts++
			warm()
		}
		waited, quiet := waitQuiet(ctx, st.Temporal.CPUTime)
		if !quiet {
			say("the dev server was not quiet after %s, before %s; timing it anyway", waited.Round(time.Second), before)
		}
		return waited, nil
	}
	// The ladders: payguard's orders placed the starter's way (the
	// workflow started with the Temporal client) and, with the api phase,
	// through the HTTP order API. Both climb the same rates by the same
	// rule, a step of one then the same step of the other, so that the
	// machine's drift and the dev server's growing database weigh on both
	// alike and api ÷ direct compares like with like.
	var ladders []*ladder
	if o.has("rates") {
		ladders = append(ladders, &ladder{name: "payguard", of: "the ", profile: "worker-cpu-%g.pprof", cpu: cpu})
	}
	if api != nil {
		apiCPU := cpu
		apiCPU.api = api.CPUTime
		ladders = append(ladders, &ladder{name: "payguard via API", of: "the API's ", profile: "worker-cpu-api-%g.pprof", via: api.place, cpu: apiCPU})
	}
	if len(ladders) > 0 {
		waited, err := settle("payguard's steps")
		if err != nil {
			return err
		}
		rep.QuietWaitSec = round2(waited.Seconds())
	}

	var confirmed, lookupOrder string
	var stepOutcomes []store.Outcome
	if len(ladders) > 0 {
		runRate := func(l *ladder, rate float64) Step {
			profiled := make(chan error, 1)
			if o.Profile && o.Step >= time.Second {
				go func() {
					profiled <- saveCPUProfile(ctx, w.HTTPAddr, o.Step, filepath.Join(o.Out, fmt.Sprintf(l.profile, rate)))
				}()
			} else {
				profiled <- nil
			}
			// No breaker watch: pgsim is calm, and the load generator's
			// /metrics scrape every 200 ms was over a third of the worker's
			// CPU in the first profile — the bench's cost, not payguard's.
			before := l.cpu.read()
			step, sum := runStep(ctx, st.Client, rate, o.Step, l.via, nil)
			step.CPU = l.cpu.per(before, step.Launched)
			// Read after the step's wait: an order still open then is not
			// final, and not lost.
			outs, err := sum.ReadOutcomes(ctx, ledger)
			if err != nil {
				say("outcomes of %s%g/s step: %v", l.of, rate, err)
			}
			step.Outcomes = loadgen.SumOutcomes(outs)
			stepOutcomes = append(stepOutcomes, outs...)
			if err := <-profiled; err != nil {
				say("profile at %g/s: %v", rate, err)
			}
			l.steps = append(l.steps, step)
			overloaded = overloaded || !step.Sustained
			say("%s %5.1f/s offered: %5.1f confirmed/s, p50 %.0f ms, p99 %.0f ms, first answer p50 %.0f ms %s", l.name, rate, step.Throughput,
				step.Latency.P50, step.Latency.P99, step.FirstAnswer.P50, verdict(step))
			for _, s := range sum.Orders {
				if s.Final == "CONFIRMED" {
					confirmed = s.OrderID
				}
			}
			return step
		}
		// Each ladder climbs until its first rate not sustained; a step
		// that follows one not sustained (the other ladder's, at the same
		// rate) runs on the dev server restarted, as every phase does.
		for _, rate := range o.Rates {
			climbing := false
			for _, l := range ladders {
				if l.hi != 0 || ctx.Err() != nil {
					continue
				}
				climbing = true
				if overloaded {
					if _, err := settle(l.stepName(rate)); err != nil {
						return err
					}
				}
				if runRate(l, rate).Sustained {
					l.lo = rate
				} else {
					l.hi = rate
				}
			}
			if !climbing || ctx.Err() != nil {
				break
			}
		}
		// The rates' grid is coarse at the top (5 orders/s between steps
		// by default) while the baseline is measured to a tenth: halving
		// the gap between the last sustained rate and the first not finds
		// the highest sustained rate to within gap/2^refine. Each step
		// starts on a quiet server, as the first did: the failed step's
		// backlog is not the next one's load.
		for range o.Refine {
			for _, l := range ladders {
				if l.hi == 0 || ctx.Err() != nil {
					continue
				}
				mid, ok := between(l.lo, l.hi)
				if !ok {
					continue
				}
				if _, err := settle(l.stepName(mid)); err != nil {
					return err
				}
				if runRate(l, mid).Sustained {
					l.lo = mid
				} else {
					l.hi = mid
				}
			}
		}
		for _, l := range ladders {
			slices.SortStableFunc(l.steps, func(a, b Step) int { return cmp.Compare(a.Offered, b.Offered) })
			if l.via == nil {
				rep.Steps = l.steps
			} else {
				rep.APISteps = l.steps
			}
		}
		rep.Outcomes = loadgen.SumOutcomes(stepOutcomes)
		rep.Lost = rep.Outcomes.Lost
	}
	// The machine's speed drifts over a run (by a tenth within a quarter
	// of an hour here): a second baseline after the steps brackets them,
	// and the ratio is taken against the two baselines' mean.
	if o.has("baseline") && len(ladders) > 0 {
		if _, err := settle("the second baseline"); err != nil {
			return err
		}
		if rep.BaselineAfter, err = baseline("after"); err != nil {
			return err
		}
	}
	rep.summarise()
	if o.has("breaker") {
		lookupOrder = confirmed
		if lookupOrder == "" {
			lookupOrder = "bench-no-such-order"
		}
		warm, limit, rates := 12*time.Second, 30*time.Second, []float64{1, 3, 10}
		if o.Quick {
			warm, limit, rates = time.Second, 10*time.Second, []float64{10}
		}
		say("breaker: gateway down → OPEN at %v lookups/s...", rates)
		b, err := runBreaker(ctx, st.Pgsim.GatewayURL, st.Pgsim.AdminURL, lookupOrder, rates, warm, limit, 2000)
		if err != nil {
			return err
		}
		rep.Breaker = &b
	}
	if o.has("capacity") {
		say("capacity: %d orders left waiting...", o.Waiting)
		c, err := runCapacity(ctx, st.Client, db, st.Pgsim.AdminURL, w.HTTPAddr, o.Waiting, capacityRate, confirmed)
		if err != nil {
			return err
		}
		rep.Capacity = &c
	}
	rep.Machine.LoadAfter = loadAverage()
	fmt.Fprint(stdout, rep.Table())
	if err := rep.write(o.Out); err != nil {
		return err
	}
	say("wrote %s and %s", filepath.Join(o.Out, "report.json"), filepath.Join(o.Out, "report.svg"))
	return nil
}

// ladder is one way of placing payguard's orders, climbing the rates.
type ladder struct {
	name    string // the log's name of its steps
	of      string // "the " or "the API's ": whose step a message names
	profile string // the worker's CPU profile file of a step, %g the rate
	via     place  // nil: the starter's load path
	cpu     cpuMeter
	steps   []Step
	lo, hi  float64 // the last rate sustained, the first not (0: none yet)
}

func (l *ladder) stepName(rate float64) string { return fmt.Sprintf("%s%g/s step", l.of, rate) }

// between is the rate halfway from lo (sustained) to hi (not), to half an
// order a second; false when no such rate lies strictly between them.
func between(lo, hi float64) (float64, bool) {
	mid := math.Round(lo+hi) / 2
	return mid, mid > lo && mid < hi
}

func verdict(s Step) string {
	if s.Sustained {
		return "sustained"
	}
	return "NOT sustained: " + s.Why
}
