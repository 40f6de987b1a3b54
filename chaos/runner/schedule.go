package runner

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/payguard/payguard/chaos/stack"
)

// Fault kinds of a schedule.
const (
	LinkLatency   = "link-latency"
	LinkReset     = "link-reset"
	LinkTimeout   = "link-blackhole"
	LinkBandwidth = "link-bandwidth"
	PgsimDown     = "pgsim-down"
	Pgsim5xx      = "pgsim-5xx"
	PgsimTimeout  = "pgsim-timeout-after-processing"
	// PgsimCreated500 answers creates 500 after making their transaction:
	// the lookup by order id must find it before any re-send.
	PgsimCreated500   = "pgsim-500-after-create"
	CallbacksLost     = "callbacks-lost"
	CallbacksDup      = "callbacks-duplicated"
	CallbacksDelayed  = "callbacks-delayed"
	PgsimSlow         = "pgsim-slow-processing"
	WorkerKill        = "worker-kill"
	PostgresTerminate = "postgres-terminate-backends"
	TemporalRestart   = "temporal-restart"
)

var (
	linkKinds  = []string{LinkLatency, LinkReset, LinkTimeout, LinkBandwidth}
	pgsimKinds = []string{PgsimDown, Pgsim5xx, PgsimTimeout, PgsimCreated500, CallbacksLost, CallbacksDup, CallbacksDelayed, PgsimSlow}
)

// Fault is one planned fault: what, where, when and for how long.
type Fault struct {
	ID     string  `json:"id"`
	Kind   string  `json:"kind"`
	Target string  `json:"target,omitempty"`
	At     float64 `json:"atSeconds"`
	For    float64 `json:"forSeconds"`
	// Applied, Error and EndedAt are filled in as the run goes. EndedAt is
	// when it was over (seconds, as At): healed, or for an instant fault (a
	// restart) when its doing returned.
	Applied bool    `json:"applied"`
	Error   string  `json:"error,omitempty"`
	EndedAt float64 `json:"endedAtSeconds,omitempty"`
}

// Plan draws the schedule of a run from its seed alone, so a seed replays
// the same faults at the same offsets. Every class of fault (a link, pgsim,
// a worker crash, PostgreSQL, Temporal) appears at least once, then the
// rest are drawn at random; a dev-server restart costs seconds of a
// two-core machine, so there is one per minute of run at most.
func Plan(seed uint64, duration time.Duration, links []string, workers int) []Fault {
	rng := rand.New(rand.NewPCG(seed, 0x70617967756172)) // "payguar"
	links = slices.Sorted(slices.Values(links))
	d := duration.Seconds()
	pick := func(list []string) string { return list[rng.IntN(len(list))] }
	draw := func(class int) Fault {
		f := Fault{At: d * (0.05 + 0.75*rng.Float64()), For: 2 + rng.Float64()*min(10, d/4)}
		switch class {
		case 0:
			f.Kind, f.Target = pick(linkKinds), pick(links)
		case 1:
			f.Kind, f.Target = pick(pgsimKinds), "pgsim"
		case 2:
			f.Kind, f.Target = WorkerKill, fmt.Sprintf("worker%d", 1+rng.IntN(workers))
		case 3:
			f.Kind, f.Target, f.For = PostgresTerminate, "postgres", 0
		default:
			f.Kind, f.Target, f.For = TemporalRestart, "temporal", 0
		}
		return f
	}
	var plan []Fault
	for class := range 5 {
		plan = append(plan, draw(class))
	}
	// A link fault that overlaps a fault cutting one of the link's ends is
	// drawn again (bounded), and dropped if it cannot be placed.
	placeLinkFaults := func() {
		for i := range plan {
			for try := 0; isLink(plan[i].Kind) && overlapsACut(plan[i], plan) && try < 20; try++ {
				plan[i] = draw(0)
			}
		}
		plan = slices.DeleteFunc(plan, func(f Fault) bool { return isLink(f.Kind) && overlapsACut(f, plan) })
	}
	restarts, maxRestarts := 1, max(1, int(d/60))
	for n := max(5, int(d/4)); len(plan) < n; {
		// Weights: links 45%, pgsim 30%, worker crash 10%, PostgreSQL 10%, Temporal 5%.
		var class int
		switch p := rng.Float64(); {
		case p < 0.45:
			class = 0
		case p < 0.75:
			class = 1
		case p < 0.85:
			class = 2
		case p < 0.95:
			class = 3
		default:
			class = 4
		}
		if class == 4 {
			if restarts >= maxRestarts {
				continue
			}
			restarts++
		}
		plan = append(plan, draw(class))
	}
	placeLinkFaults()
	slices.SortStableFunc(plan, func(a, b Fault) int {
		switch {
		case a.At < b.At:
			return -1
		case a.At > b.At:
			return 1
		}
		return 0
	})
	for i := range plan {
		plan[i].ID = fmt.Sprintf("f%02d", i+1)
		plan[i].At = round1(plan[i].At)
		plan[i].For = round1(plan[i].For)
	}
	return plan
}

func isLink(kind string) bool { return slices.Contains(linkKinds, kind) }

// cuts reports whether fault k kills the connections of link: a restart or
// kill of one of its ends. Toxiproxy cannot always take a toxic off a link
// whose connections died under it — RemoveToxic blocks for ever on the dead
// sink while holding the link's lock (Shopify/toxiproxy#558), which once
// wedged the worker→Temporal link for the rest of a run. So a link fault
// never overlaps such a fault on the same link.
func cuts(k Fault, link string) bool {
	switch k.Kind {
	case TemporalRestart:
		return link == stack.LinkTemporal
	case PgsimDown:
		return link == stack.LinkGateway || strings.HasPrefix(link, stack.LinkCallbackPrefix)
	case PostgresTerminate:
		return link == stack.LinkPostgres
	case WorkerKill:
		// The worker links are shared by both workers; a callback link is one
		// worker's.
		return !strings.HasPrefix(link, stack.LinkCallbackPrefix) || link == stack.LinkCallbackPrefix+strings.TrimPrefix(k.Target, "worker")
	}
	return false
}

// overlapsACut: some fault of the plan cuts f's link while f is on it (a
// second of margin each side).
func overlapsACut(f Fault, plan []Fault) bool {
	for _, k := range plan {
		if cuts(k, f.Target) && k.At <= f.At+f.For+1 && f.At <= k.At+k.For+1 {
			return true
		}
	}
	return false
}

func round1(v float64) float64 { return float64(int(v*10+0.5)) / 10 }
