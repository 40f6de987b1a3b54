package e2e_test

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/starter/cli"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

// Three worker processes on one task queue and one database, with fleet
// breakers (--breaker-scope fleet): a trip, its half-open trials and its
// recovery are the fleet's, not each worker's.

// The gateway's lookups failing: the fleet's lookup breaker trips once —
// one trip's worth of lookups reach the dead gateway, not one per worker —
// every worker sees it open within a second of the first, and recovery
// closes it in all three; the orders then confirm.
func TestThreeWorkersShareOneLookupBreaker(t *testing.T) {
	t.Parallel()
	f := testenv.QuietFaults()
	sim := testenv.Pgsim(t, f)
	const minCalls = 5
	env, addrs := startWorkers(t, sim.GatewayURL(), "--poll-initial", "200ms", "--poll-max", "500ms",
		"--breaker-min-calls", fmt.Sprint(minCalls), "--breaker-open", "2s", "--breaker-half-open-calls", "3", "--breaker-scope", "fleet")
	dbURL := env["DATABASE_URL"]

	ctx := context.Background()
	st, err := store.Open(ctx, dbURL)
	require.NoError(t, err)
	defer st.Close()
	_, err = st.SetStock(ctx, "P1", 100)
	require.NoError(t, err)
	// Callbacks are lost so that only lookups can answer.
	testenv.PatchFaults(t, sim, map[string]any{"callback": map[string]any{"dropRate": 1}})
	getenv := func(k string) string { return env[k] }
	orders := []string{"fleet-1", "fleet-2", "fleet-3", "fleet-4", "fleet-5", "fleet-6"}
	testenv.PatchFaults(t, sim, map[string]any{"lookup": map[string]any{"errorRate": 1, "errorStatus": 503}})
	before := sim.Stats().Requests["lookup"]
	for _, id := range orders {
		require.NoError(t, cli.Run(ctx, []string{"order", "--product", "P1", "--qty", "1", "--amount", "5000", "--order-id", id},
			cli.Env{Getenv: getenv, Stdout: io.Discard, Stderr: io.Discard}))
	}

	var mu sync.Mutex
	openAt := map[string]time.Time{}
	testenv.Eventually(t, 60*time.Second, func() bool {
		for _, addr := range addrs {
			if lookupBreaker(t, addr) == 2 {
				mu.Lock()
				if _, ok := openAt[addr]; !ok {
					openAt[addr] = time.Now()
				}
				mu.Unlock()
			}
		}
		return len(openAt) == len(addrs)
	}, "every worker reports the lookup breaker open")
	first, last := time.Time{}, time.Time{}
	for _, at := range openAt {
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	assert.LessOrEqual(t, last.Sub(first), time.Second, "the trip reached every worker within a second")
	assert.LessOrEqual(t, sim.Stats().Requests["lookup"]-before, minCalls, "one trip's worth of lookups reached the dead gateway")

	testenv.PatchFaults(t, sim, map[string]any{"lookup": map[string]any{"errorRate": 0}})
	testenv.Eventually(t, 60*time.Second, func() bool {
		for _, id := range orders {
			o, err := st.GetOrder(ctx, id)
			if err != nil || o.Status != status.OrderConfirmed {
				return false
			}
		}
		return true
	}, "every order confirmed by a lookup after the recovery")
	for _, addr := range addrs {
		assert.Equal(t, 0.0, lookupBreaker(t, addr), "worker %s sees the breaker closed", addr)
	}
	for _, id := range orders {
		assert.Equal(t, 1, sim.Stats().Orders[id].CreateRequests, "order %s: one create", id)
	}
}

// lookupBreaker is the lookup breaker's state as the worker at addr sees it.
func lookupBreaker(t *testing.T, addr string) float64 {
	return breakerState(t, addr, activities.LookupBreakerName)
}
