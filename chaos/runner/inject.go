package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/payguard/payguard/chaos/stack"
	"github.com/payguard/payguard/pgsim/simulator"
)

// injector applies and heals the faults of a schedule on a running stack.
type injector struct {
	st   *stack.Stack
	base simulator.Faults // pgsim's calm settings, restored on heal
	rng  *rand.Rand       // fault strengths; seeded, so a seed replays them
	mu   sync.Mutex       // guards rng
	log  func(string, ...any)
}

func (in *injector) intn(lo, hi int) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return lo + in.rng.IntN(hi-lo+1)
}

// apply starts a fault and returns what heals it.
func (in *injector) apply(ctx context.Context, f Fault) (func(), error) {
	switch f.Kind {
	case LinkLatency:
		return in.toxic(f, "latency", map[string]any{"latency": in.intn(300, 1500), "jitter": 200})
	case LinkReset:
		return in.toxic(f, "reset_peer", map[string]any{"timeout": in.intn(0, 1000)})
	case LinkTimeout:
		// timeout 0: data is swallowed and the connection held open until healed.
		return in.toxic(f, "timeout", map[string]any{"timeout": 0})
	case LinkBandwidth:
		return in.toxic(f, "bandwidth", map[string]any{"rate": in.intn(1, 16)})
	case PgsimDown:
		return in.pgsim(ctx, map[string]any{"down": true}, map[string]any{"down": in.base.Down})
	case Pgsim5xx:
		return in.pgsim(ctx, endpoints(func(string) any { return map[string]any{"errorRate": 0.6} }),
			endpoints(func(ep string) any { return map[string]any{"errorRate": in.endpoint(ep).ErrorRate} }))
	case PgsimTimeout:
		// Held past the worker's read timeout: the gateway acted, the worker cannot know.
		return in.pgsim(ctx, endpoints(func(string) any { return map[string]any{"timeoutRate": 0.5, "timeoutDelay": "4s"} }),
			endpoints(func(ep string) any {
				e := in.endpoint(ep)
				return map[string]any{"timeoutRate": e.TimeoutRate, "timeoutDelay": e.TimeoutDelay}
			}))
	case PgsimCreated500:
		return in.pgsim(ctx, map[string]any{"create": map[string]any{"createdThen500Rate": 0.5}},
			map[string]any{"create": map[string]any{"createdThen500Rate": in.base.Create.CreatedThen500Rate}})
	case CallbacksLost:
		return in.pgsim(ctx, map[string]any{"callback": map[string]any{"dropRate": 0.8}},
			map[string]any{"callback": map[string]any{"dropRate": in.base.Callback.DropRate}})
	case CallbacksDup:
		return in.pgsim(ctx, map[string]any{"callback": map[string]any{"duplicateRate": 0.8}},
			map[string]any{"callback": map[string]any{"duplicateRate": in.base.Callback.DuplicateRate}})
	case CallbacksDelayed:
		return in.pgsim(ctx, map[string]any{"callback": map[string]any{"delay": "3s"}},
			map[string]any{"callback": map[string]any{"delay": in.base.Callback.Delay}})
	case PgsimSlow:
		return in.pgsim(ctx, map[string]any{"processing": map[string]any{"min": "3s", "max": "8s"}},
			map[string]any{"processing": map[string]any{"min": in.base.Processing.Min, "max": in.base.Processing.Max}})
	case WorkerKill:
		w := in.worker(f.Target)
		if w == nil || !w.Running() {
			return nil, fmt.Errorf("%s is not running", f.Target)
		}
		if err := w.Kill(); err != nil {
			return nil, err
		}
		return func() {
			if err := w.Start(context.WithoutCancel(ctx)); err != nil {
				in.log("restart %s: %v", f.Target, err)
			}
		}, nil
	case PostgresTerminate:
		// A few rounds a second apart: connections the pools re-open at
		// once are hit again.
		for i := range 3 {
			if i > 0 {
				time.Sleep(time.Second) // part of the fault, not a wait for a condition
			}
			if _, err := in.st.TerminateBackends(ctx); err != nil {
				return nil, err
			}
		}
		return nil, nil
	case TemporalRestart:
		return nil, in.st.Temporal.Restart(context.WithoutCancel(ctx))
	}
	return nil, fmt.Errorf("unknown fault kind %q", f.Kind)
}

func (in *injector) toxic(f Fault, kind string, attrs map[string]any) (func(), error) {
	if err := in.st.Links.Toxic(f.Target, f.ID, kind, attrs); err != nil {
		return nil, err
	}
	return func() { in.st.Links.Heal(f.Target, f.ID) }, nil
}

func endpoints(v func(ep string) any) map[string]any {
	return map[string]any{"create": v("create"), "lookup": v("lookup"), "cancel": v("cancel")}
}

func (in *injector) endpoint(name string) simulator.EndpointFaults {
	switch name {
	case "create":
		return in.base.Create.EndpointFaults
	case "lookup":
		return in.base.Lookup
	}
	return in.base.Cancel
}

func (in *injector) pgsim(ctx context.Context, set, heal map[string]any) (func(), error) {
	if err := patchFaults(ctx, in.st.Pgsim.AdminURL, set); err != nil {
		return nil, err
	}
	return func() {
		if err := patchFaults(context.WithoutCancel(ctx), in.st.Pgsim.AdminURL, heal); err != nil {
			in.log("heal pgsim: %v", err)
		}
	}, nil
}

func (in *injector) worker(name string) *stack.Worker {
	for _, w := range in.st.Workers {
		if fmt.Sprintf("worker%d", w.N) == name {
			return w
		}
	}
	return nil
}

// healAll is the end of the chaos: no toxic, pgsim calm, every worker up.
func (in *injector) healAll(ctx context.Context) error {
	in.st.Links.HealAll()
	raw, err := json.Marshal(in.base)
	if err != nil {
		return err
	}
	var all map[string]any
	if err := json.Unmarshal(raw, &all); err != nil {
		return err
	}
	if err := patchFaults(ctx, in.st.Pgsim.AdminURL, all); err != nil {
		return err
	}
	for _, w := range in.st.Workers {
		if !w.Running() {
			if err := w.Start(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

func getFaults(ctx context.Context, adminURL string) (simulator.Faults, error) {
	var f simulator.Faults
	return f, simulator.AdminCall(ctx, http.MethodGet, adminURL, "/admin/faults", nil, &f)
}

func patchFaults(ctx context.Context, adminURL string, patch map[string]any) error {
	return simulator.PatchFaults(ctx, adminURL, patch)
}
