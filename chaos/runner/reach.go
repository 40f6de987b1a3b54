package runner

import (
	"fmt"
	"io"
	"time"

	"github.com/payguard/payguard/chaos/check"
	"github.com/payguard/payguard/chaos/stack"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/worker/service"
)

// What I8 is told of the run: when the gateway was not reachable as usual,
// and the settings its "long enough" is made of.

// workerArgs are the chaos workers' tuning flags: short timeouts and polls,
// so a run of minutes sees many order lives.
func workerArgs(o Options) []string {
	return []string{"--connect-timeout", "500ms", "--read-timeout", "2s", "--unknown-grace", "3s",
		"--poll-initial", "1s", "--poll-max", "3s", "--shutdown-timeout", "3s",
		"--breaker-window", "10s", "--breaker-open", "3s", fmt.Sprintf("--idempotency-keys=%t", o.IdempotencyKeys)}
}

// timings are I8's settings: the workers' flags as the worker itself
// parses them (its defaults for what chaos does not set), and the gateway's
// calm processing.
func timings(args []string, calm simulator.Faults) (check.Timings, error) {
	c, err := service.ParseFlags(args, func(string) string { return "" }, io.Discard)
	if err != nil {
		return check.Timings{}, fmt.Errorf("the chaos workers' flags: %w", err)
	}
	return check.Timings{ConnectTimeout: c.ConnectTimeout, ReadTimeout: c.ReadTimeout, UnknownGrace: c.UnknownGrace,
		AnsweredGrace: c.AnsweredGrace, PollMax: c.PollMax, BreakerOpen: max(c.Breaker.OpenFor, c.RequestBreaker.OpenFor),
		Decision: time.Duration(calm.Processing.Max)}, nil
}

// cutsReach reports whether fault f leaves the gateway not reachable as
// usual while it lasts: the gateway's own faults (down, 5xx, held answers,
// slow decisions), any toxic on a link a create needs (the worker's to
// pgsim, PostgreSQL and Temporal), a Temporal restart, a worker killed (its
// tasks wait out their timeouts). Not: callback faults and the callback
// links (polling answers), PostgreSQL's backends terminated (the pools
// reconnect at once), and a create answered 500 after acting — the lookup
// is to catch that, which I8 holds it to.
func cutsReach(f Fault) bool {
	switch f.Kind {
	case PgsimDown, Pgsim5xx, PgsimTimeout, PgsimSlow, TemporalRestart, WorkerKill:
		return true
	case LinkLatency, LinkReset, LinkTimeout, LinkBandwidth:
		return f.Target == stack.LinkGateway || f.Target == stack.LinkPostgres || f.Target == stack.LinkTemporal
	}
	return false
}

// unreachable are the stretches the applied faults cut, on the clock of
// the run that began at began.
func unreachable(plan []Fault, began time.Time) []check.Stretch {
	var out []check.Stretch
	for _, f := range plan {
		if !f.Applied || !cutsReach(f) {
			continue
		}
		end := max(f.EndedAt, f.At+f.For)
		out = append(out, check.Stretch{From: began.Add(seconds(f.At)), To: began.Add(seconds(end)),
			Why: fmt.Sprintf("%s %s %s", f.ID, f.Kind, f.Target)})
	}
	return out
}
