package harness

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/loadgen"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/store"
)

// The breaker phase calls the LookupPayment activity method in the bench
// process, with the breaker the worker builds (activities.NewLookupBreaker,
// default settings) and a real gateway client against the run's pgsim: the
// lookup rate is then exactly the one asked for, and an open breaker's cost
// is timed around the activity's own code, without Temporal's task hops or
// HTTP in the way.

// BreakerTrip is the time from gateway down to OPEN at one lookup rate.
type BreakerTrip struct {
	LookupsPerSec float64 `json:"lookupsPerSecond"`
	ToOpenSec     float64 `json:"downToOpenSeconds"` // -1: not OPEN within the limit
	Lookups       int     `json:"lookupsWhileDown"`
}

// BreakerResult is the breaker phase.
type BreakerResult struct {
	Settings activities.BreakerSettings `json:"settings"`
	// OpenLookup is the activity's time when the breaker refuses, in µs.
	OpenLookup loadgen.Percentiles `json:"openLookupMicros"`
	Trips      []BreakerTrip       `json:"trips"`
}

type lookupRig struct {
	acts    *activities.Activities
	opened  chan struct{}
	once    sync.Once
	orderID string
}

// newLookupRig looks the order up as a worker does, its answer held to
// the order's books (ledger: a transaction of another amount is left out).
func newLookupRig(ledger *store.Store, gatewayURL, orderID string) (*lookupRig, error) {
	g, err := gateway.New(gateway.Config{BaseURL: gatewayURL})
	if err != nil {
		return nil, err
	}
	r := &lookupRig{opened: make(chan struct{}), orderID: orderID}
	br := activities.NewLookupBreaker(activities.DefaultBreakerSettings(), func(_ string, _, to gobreaker.State) {
		if to == gobreaker.StateOpen {
			r.once.Do(func() { close(r.opened) })
		}
	})
	r.acts = activities.New(ledger, g, br, activities.Config{}, nil)
	return r, nil
}

func (r *lookupRig) lookup(ctx context.Context) error {
	_, err := r.acts.LookupPayment(ctx, activities.LookupInput{OrderID: r.orderID, UserID: "bench"})
	return err
}

// runBreaker times the open breaker and, per rate, gateway down → OPEN:
// lookups at rate for warm (filling the breaker's window with successes),
// then the gateway's port closed until the breaker opens or limit passes.
func runBreaker(ctx context.Context, ledger *store.Store, gatewayURL, adminURL, orderID string, rates []float64, warm, limit time.Duration, openCalls int) (BreakerResult, error) {
	res := BreakerResult{Settings: activities.DefaultBreakerSettings()}
	defer func() { _ = simulator.PatchFaults(context.Background(), adminURL, map[string]any{"down": false}) }()
	for i, rate := range rates {
		rig, err := newLookupRig(ledger, gatewayURL, orderID)
		if err != nil {
			return res, err
		}
		if err := simulator.PatchFaults(ctx, adminURL, map[string]any{"down": false}); err != nil {
			return res, err
		}
		every := time.Duration(float64(time.Second) / rate)
		tick := time.NewTicker(every)
		for end := time.Now().Add(warm); time.Now().Before(end) && ctx.Err() == nil; <-tick.C {
			if err := rig.lookup(ctx); err != nil {
				tick.Stop()
				return res, fmt.Errorf("lookup before the gateway went down: %w", err)
			}
		}
		if err := simulator.PatchFaults(ctx, adminURL, map[string]any{"down": true}); err != nil {
			tick.Stop()
			return res, err
		}
		down := time.Now()
		trip := BreakerTrip{LookupsPerSec: rate, ToOpenSec: -1}
	wait:
		for time.Since(down) < limit {
			go func() { _ = rig.lookup(ctx) }()
			trip.Lookups++
			select {
			case <-rig.opened:
				trip.ToOpenSec = round2(time.Since(down).Seconds())
				break wait
			case <-ctx.Done():
				break wait
			case <-tick.C:
			}
		}
		tick.Stop()
		res.Trips = append(res.Trips, trip)
		if i == 0 && trip.ToOpenSec >= 0 {
			res.OpenLookup = timeOpenLookups(ctx, rig, openCalls)
		}
	}
	return res, ctx.Err()
}

// timeOpenLookups calls the activity n times against the open breaker;
// the percentiles are in microseconds (an open breaker answers in a few).
func timeOpenLookups(ctx context.Context, rig *lookupRig, n int) loadgen.Percentiles {
	us := make([]float64, 0, n)
	for range n {
		start := time.Now()
		_ = rig.lookup(ctx)
		us = append(us, float64(time.Since(start).Nanoseconds())/1e3)
	}
	return loadgen.Latencies(us)
}
