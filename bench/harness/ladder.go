package harness

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/loadgen"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

// ladder is one kind of workflow climbing the rates: payguard's orders
// placed the starter's way or through the API, or a baseline's. All
// climb the same rates by the same rule (runStep), so that the ratios
// compare like with like.
type ladder struct {
	name    string // the report's and the log's name of its steps
	of      string // "the ", "the API's ", ...: whose step a message names
	profile string // the worker's CPU profile file of a step, %g the rate ("": none)
	via     place  // nil: the starter's load path
	cpu     cpuMeter
	// baseline: served by the bench's own worker during its steps, with no
	// order rows in the ledger.
	baseline bool
	steps    []Step
	lo, hi   float64 // the last rate sustained, the first not (0: none yet)
	// confirmed is the order id of one confirmed order of its steps, whose
	// history the report reads.
	confirmed string
}

func (l *ladder) stepName(rate float64) string { return fmt.Sprintf("%s%g/s step", l.of, rate) }

// climber runs the ladders' steps on the bench's stack.
type climber struct {
	o      Options
	cl     client.Client
	ledger *store.Store
	// dial connects the baselines' worker to Temporal on a connection of
	// its own, as payguard's worker process has: not beside the load
	// generator's starts and waits on cl.
	dial func(context.Context) (client.Client, error)
	// workerHTTP is payguard's worker's address, for its CPU profile.
	workerHTTP string
	say        func(format string, a ...any)
	// settle readies the stack before a timed step (run.go);
	// overloaded tells it a step was not sustained.
	settle     func(before string) error
	overloaded *bool
	outcomes   []store.Outcome
}

// climb runs every ladder up the rates, each until its first rate not
// sustained, one step of each ladder per rate in turn so that the
// machine's drift and the server's growing database weigh on all alike;
// then refines each between its last sustained rate and its first not.
func (c *climber) climb(ctx context.Context, ladders []*ladder) error {
	for _, rate := range c.o.Rates {
		climbing := false
		for _, l := range ladders {
			if l.hi != 0 || ctx.Err() != nil {
				continue
			}
			climbing = true
			if *c.overloaded {
				if err := c.settle(l.stepName(rate)); err != nil {
					return err
				}
			}
			if err := c.step(ctx, l, rate); err != nil {
				return err
			}
		}
		if !climbing || ctx.Err() != nil {
			break
		}
	}
	// The rates' grid is coarse at the top while a step is short: halving
	// the gap between the last sustained rate and the first not finds the
	// highest sustained rate to within gap/2^refine. Each step starts on
	// a quiet server: the failed step's backlog is not the next one's load.
	for range c.o.Refine {
		for _, l := range ladders {
			if l.hi == 0 || ctx.Err() != nil {
				continue
			}
			mid, ok := between(l.lo, l.hi)
			if !ok {
				continue
			}
			if err := c.settle(l.stepName(mid)); err != nil {
				return err
			}
			if err := c.step(ctx, l, mid); err != nil {
				return err
			}
		}
	}
	for _, l := range ladders {
		slices.SortStableFunc(l.steps, func(a, b Step) int { return cmp.Compare(a.Offered, b.Offered) })
	}
	return nil
}

// step runs one step of l at rate and moves its bounds.
func (c *climber) step(ctx context.Context, l *ladder, rate float64) error {
	profiled := make(chan error, 1)
	if c.o.Profile && l.profile != "" && c.o.Step >= time.Second {
		go func() {
			profiled <- saveCPUProfile(ctx, c.workerHTTP, c.o.Step, filepath.Join(c.o.Out, fmt.Sprintf(l.profile, rate)))
		}()
	} else {
		profiled <- nil
	}
	if l.baseline {
		// No-op tasks are served by this process during their steps only.
		wc, err := c.dial(ctx)
		if err != nil {
			return err
		}
		defer wc.Close()
		w, err := startBaselineWorker(wc)
		if err != nil {
			return err
		}
		defer w.Stop()
	}
	// No breaker watch: pgsim is calm, and the load generator's /metrics
	// scrape every 200 ms was over a third of the worker's CPU in the
	// first profile — the bench's cost, not payguard's.
	before := l.cpu.read()
	s, sum := runStep(ctx, c.cl, rate, c.o.Step, l.via, nil)
	s.CPU = l.cpu.per(before, s.Launched)
	if !l.baseline {
		// Read after the step's wait: an order still open then is not
		// final, and not lost.
		outs, err := sum.ReadOutcomes(ctx, c.ledger)
		if err != nil {
			c.say("outcomes of %s%g/s step: %v", l.of, rate, err)
		}
		s.Outcomes = loadgen.SumOutcomes(outs)
		c.outcomes = append(c.outcomes, outs...)
	}
	if err := <-profiled; err != nil {
		c.say("profile at %g/s: %v", rate, err)
	}
	l.steps = append(l.steps, s)
	*c.overloaded = *c.overloaded || !s.Sustained
	c.say("%s %5.1f/s offered: %5.1f confirmed/s, p50 %.0f ms, p99 %.0f ms, first answer p50 %.0f ms %s", l.name, rate, s.Throughput,
		s.Latency.P50, s.Latency.P99, s.FirstAnswer.P50, verdict(s))
	for _, o := range sum.Orders {
		if o.Final == string(status.OrderConfirmed) {
			l.confirmed = o.OrderID
		}
	}
	if s.Sustained {
		l.lo = rate
	} else {
		l.hi = rate
	}
	return nil
}

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

// The ladders' names, as the report and the log give them.
const (
	minimalLadder  = "minimal"
	noopLadder     = "no-op"
	payguardLadder = "payguard"
	apiLadder      = "payguard via API"
)

// ladders are the phases' ladders, the baselines first at each rate. The
// baselines' workers are this process: their CPU is the server's and the
// bench's.
func (o Options) ladders(cl client.Client, cpu cpuMeter, api *apiServer) []*ladder {
	var ls []*ladder
	if o.has("minimal") {
		ls = append(ls, &ladder{name: minimalLadder, of: "the minimal workflow's ", via: placeMinimal(cl), cpu: cpuMeter{server: cpu.server}, baseline: true})
	}
	if o.has("baseline") {
		ls = append(ls, &ladder{name: noopLadder, of: "the no-op workflow's ", via: placeNoop(cl), cpu: cpuMeter{server: cpu.server}, baseline: true})
	}
	if o.has("rates") {
		ls = append(ls, &ladder{name: payguardLadder, of: "the ", profile: "worker-cpu-%g.pprof", cpu: cpu})
	}
	if api != nil {
		apiCPU := cpu
		apiCPU.api = api.CPUTime
		ls = append(ls, &ladder{name: apiLadder, of: "the API's ", profile: "worker-cpu-api-%g.pprof", via: api.place, cpu: apiCPU})
	}
	return ls
}
