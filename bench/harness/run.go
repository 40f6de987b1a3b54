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
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/payguard/payguard/chaos/stack"
	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/internal/devserver"
	"github.com/payguard/payguard/internal/exitcode"
	"github.com/payguard/payguard/internal/temporalserver"
	"github.com/payguard/payguard/loadgen"
	"github.com/payguard/payguard/status"
)

// Options are the bench's flags.
type Options struct {
	Bin        string
	Out        string
	Quick      bool
	Rates      []float64           // every ladder's open-loop steps, rising
	Refine     int                 // bisections between the last sustained rate and the first not
	Step       time.Duration       // each step's launch time
	Waiting    int                 // orders left waiting in the capacity phase
	WorkerArgs []string            // extra worker flags (the levers under test)
	Phases     string              // which phases run
	Label      string              // names the run in the report (e.g. the lever)
	Eager      bool                // the dev server runs with devserver.EagerArgs
	Temporal   temporalserver.Kind // which Temporal the stack runs on
	// Workers is how many worker processes serve payguard's task queue
	// (sharing the fleet breaker); the CPU profile and the capacity phase's
	// memory are the first one's.
	Workers int
	Profile bool // save the worker's CPU profile of each rate step
}

// quick is the harness's smoke size: every phase, small and short.
func (o *Options) quick() {
	o.Rates, o.Step, o.Waiting, o.Refine = []float64{2, 4}, 3*time.Second, 50, 0
}

func parseFlags(args []string, getenv func(string) string, usage io.Writer) (Options, error) {
	fs, finish := newFlagSet()
	fs.SetOutput(usage)
	if err := config.Parse(fs, args, getenv); err != nil {
		return Options{}, err
	}
	o, err := finish()
	return o, exitcode.UsageError(err)
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
	fs.BoolVar(&o.Quick, "quick", false, "smoke size: rates 2 and 4 for 3 s each, no refining, 50 waiting orders")
	fs.StringVar(&rates, "rates", "10,20,30,35,40,45,50,55,60,70,80,90,100", "open-loop rates (orders or workflows/s), rising, climbed by payguard and each baseline alike; each stops at its first one not sustained")
	fs.IntVar(&o.Refine, "refine", 2, "after the first rate not sustained, this many more steps halve the gap to the last sustained one")
	fs.DurationVar(&o.Step, "step", 20*time.Second, "how long each rate launches orders")
	fs.IntVar(&o.Waiting, "waiting", 2000, "orders left waiting in the capacity phase")
	fs.BoolVar(&big, "waiting-10k", false, "leave 10 000 orders waiting (the memory target)")
	fs.StringVar(&workerArgs, "worker-args", "", "extra worker flags, space-separated (levers under test)")
	fs.StringVar(&o.Phases, "phases", "minimal,baseline,rates,api,breaker,capacity", "phases to run, comma-separated (minimal and baseline: the minimal and no-op workflows' steps; api: payguard's steps through the HTTP order API, the api binary)")
	fs.BoolVar(&o.Eager, "eager", false, "start the dev server with eager activity execution and eager workflow start on")
	fs.BoolVar(&o.Profile, "profile", false, "save the worker's CPU profile of each rate step as worker-cpu-<rate>.pprof (worker-cpu-api-<rate>.pprof through the API) in --out")
	fs.IntVar(&o.Workers, "workers", 1, "worker processes on payguard's task queue, sharing the fleet breaker (1-4; profile and capacity memory are the first's)")
	o.Temporal = temporalserver.KindDev
	fs.Var(&o.Temporal, "temporal", temporalserver.KindFlagUsage)
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
	case o.Step <= 0:
		return o, errors.New("--step must be positive")
	case o.Workers < 1 || o.Workers > 4:
		return o, fmt.Errorf("--workers must be within [1, 4], got %d", o.Workers)
	case o.Waiting < 1:
		return o, errors.New("--waiting must be at least 1")
	case o.Refine < 0 || o.Refine > 5:
		return o, fmt.Errorf("--refine must be within [0, 5], got %d", o.Refine)
	}
	for _, p := range strings.Split(o.Phases, ",") {
		if !strings.Contains(",minimal,baseline,rates,api,breaker,capacity,", ","+p+",") {
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

// Run is the bench's main; usage goes to stderr.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, getenv, stderr)
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
	rep := Report{Label: o.Label, Machine: machine(), WorkerArgs: o.WorkerArgs, Quick: o.Quick, Eager: o.Eager, Temporal: o.Temporal, Workers: o.Workers}
	var temporalArgs []string
	if o.Eager {
		temporalArgs = devserver.EagerArgs
	}
	say("starting the stack (%s, pgsim calm, %d worker(s))... load average %s", o.Temporal.Server(), o.Workers, rep.Machine.LoadBefore)
	st, err := stack.Start(ctx, stack.Options{
		Bin: o.Bin, TemporalCLI: cli, Out: o.Out, AdminDBURL: devserver.AdminDatabaseURL(), Secret: "bench-secret",
		Workers: o.Workers, Direct: true, DatabaseName: fmt.Sprintf("payguard_bench_%d", time.Now().UnixNano()),
		PgsimArgs: calmPgsim, TemporalArgs: temporalArgs, Temporal: o.Temporal, WorkerArgs: append([]string{"--pprof", "--shutdown-timeout", "3s"}, o.WorkerArgs...),
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
	workersCPU := func() time.Duration {
		var d time.Duration
		for _, w := range st.Workers {
			d += w.CPUTime()
		}
		return d
	}
	cpu := cpuMeter{server: st.Temporal.CPUTime, worker: workersCPU, gateway: st.Pgsim.CPUTime, ordersDB: st.DatabaseName()}
	var api *apiServer
	if o.has("api") {
		say("starting the order API (%s) on the stack...", filepath.Join(o.Bin, "api"))
		if api, err = startAPI(ctx, o, st); err != nil {
			return fmt.Errorf("start the API: %w", err)
		}
		defer api.Stop()
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

	// A step not sustained overloads the server (the dev server's one
	// SQLite connection, the real one's queues), and it stays slower
	// after that step's backlog is done, which the next step would pay
	// for (design §11): the next timed step starts on the server
	// restarted (same file, port and flags) and payguard's path warmed up
	// again.
	overloaded := false
	// settle waits for the server to go quiet before the next timed
	// step (quiet.go), and says so when it did not.
	settle := func(before string) (time.Duration, error) {
		if overloaded {
			// The failed step's orders still running end on the server
			// that took them, before it is stopped.
			waitQuiet(ctx, st.Temporal.CPUTime)
			overloaded = false
			say("restarting the %s after a step not sustained, before %s...", o.Temporal.Server(), before)
			if err := st.Temporal.Restart(ctx); err != nil {
				return 0, fmt.Errorf("restart the %s: %w", o.Temporal.Server(), err)
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
	ladders := o.ladders(st.Client, cpu, api)
	var confirmed string
	if len(ladders) > 0 {
		waited, err := settle("the first step")
		if err != nil {
			return err
		}
		rep.QuietWaitSec = round2(waited.Seconds())
		c := &climber{o: o, cl: st.Client, dial: st.Temporal.Dial, ledger: ledger, workerHTTP: w.HTTPAddr, say: say, overloaded: &overloaded,
			settle: func(before string) error { _, err := settle(before); return err }}
		if err := c.climb(ctx, ladders); err != nil {
			return err
		}
		rep.Outcomes = loadgen.SumOutcomes(c.outcomes)
		rep.Lost = rep.Outcomes.Lost
		for _, l := range ladders {
			*rep.stepsOf(l.name) = l.steps
			if l.confirmed != "" {
				h, err := readHistory(ctx, st.Client, l.confirmed)
				if err != nil {
					say("history of %s %s: %v", l.name, l.confirmed, err)
					continue
				}
				h.Of = l.name
				rep.Histories = append(rep.Histories, h)
			}
			if l.name == payguardLadder {
				confirmed = l.confirmed
			}
		}
	}
	rep.summarise()
	if o.has("breaker") {
		lookupOrder := confirmed
		if lookupOrder == "" {
			lookupOrder = "bench-no-such-order"
		}
		lookupWarm, limit, rates := 12*time.Second, 30*time.Second, []float64{1, 3, 10}
		if o.Quick {
			lookupWarm, limit, rates = time.Second, 10*time.Second, []float64{10}
		}
		say("breaker: gateway down → OPEN at %v lookups/s...", rates)
		b, err := runBreaker(ctx, ledger, st.Pgsim.GatewayURL, st.Pgsim.AdminURL, lookupOrder, rates, lookupWarm, limit, 2000)
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
