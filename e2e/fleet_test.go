package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"
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

// The request breaker across three worker processes: 5xx creates trip it;
// while it is OPEN the gateway sees no create from any worker; in each
// half-open period — one whose trial fails, then, the gateway healed, one
// whose trials succeed and close it — the creates that reach the gateway
// fleet-wide are at most --request-breaker-half-open-calls; every order
// then ends CONFIRMED with exactly one transaction.
func TestThreeWorkersBoundTheRequestBreakersTrials(t *testing.T) {
	t.Parallel()
	const halfOpenCalls = 2
	sim := testenv.Pgsim(t, testenv.QuietFaults())
	gatewayURL, err := url.Parse(sim.GatewayURL())
	require.NoError(t, err)
	watch := &createWatch{proxy: httputil.NewSingleHostReverseProxy(gatewayURL), trials: map[uint64]int{}}
	front := httptest.NewServer(watch)
	t.Cleanup(front.Close)
	env, addrs := startWorkers(t, front.URL, "--poll-initial", "200ms", "--poll-max", "500ms", "--breaker-scope", "fleet",
		"--request-breaker-min-calls", "3", "--request-breaker-open", "3s", "--request-breaker-half-open-calls", fmt.Sprint(halfOpenCalls),
		// An unknown create is re-sent after the grace (through the
		// breaker); enough tries that failed trials exhaust no order.
		"--unknown-grace", "3s", "--request-attempts", "10")
	ctx := context.Background()
	st, err := store.Open(ctx, env["DATABASE_URL"])
	require.NoError(t, err)
	t.Cleanup(st.Close)
	watch.setStore(st)
	_, err = st.SetStock(ctx, "P1", 100)
	require.NoError(t, err)
	var orders []string
	place := func(i int) {
		id := fmt.Sprintf("fleet-rqbrk-%d", i)
		orders = append(orders, id)
		require.NoError(t, cli.Run(ctx, []string{"order", "--product", "P1", "--qty", "1", "--amount", "5000", "--order-id", id},
			cli.Env{Getenv: func(k string) string { return env[k] }, Stdout: io.Discard, Stderr: io.Discard}))
	}

	testenv.PatchFaults(t, sim, map[string]any{"create": map[string]any{"errorRate": 1, "errorStatus": 503}})
	for i := range 3 {
		place(i)
		testenv.Eventually(t, 30*time.Second, func() bool { return sim.Stats().Orders[orders[i]].CreateRequests == 1 }, orders[i]+" create answered")
	}
	testenv.Eventually(t, 10*time.Second, func() bool {
		for _, addr := range addrs {
			if breakerState(t, addr, activities.CreateBreakerName) != 2 {
				return false
			}
		}
		return true
	}, "every worker sees the request breaker OPEN")
	for i := 3; i < 9; i++ {
		place(i)
	}
	// The gateway still failing, a half-open period's trial fails and opens
	// the breaker again; then it heals, and the next period's trials close it.
	// Healed only once a trial's 5xx has come back through the watch: a
	// trial still on its way to pgsim when the fault is lifted would succeed.
	testenv.Eventually(t, 30*time.Second, func() bool { return watch.failedTrials() >= 1 }, "a failed half-open trial")
	testenv.PatchFaults(t, sim, map[string]any{"create": map[string]any{"errorRate": 0}})
	for _, id := range orders {
		testenv.Eventually(t, time.Minute, func() bool {
			o, err := st.GetOrder(ctx, id)
			return err == nil && o.Status == status.OrderConfirmed
		}, id+" CONFIRMED after the gateway healed")
		got := sim.Stats().Orders[id]
		assert.Len(t, got.Transactions, 1, "%s: one transaction at the gateway", id)
		assert.Equal(t, 1, got.Successful, "%s: charged once", id)
	}

	watch.mu.Lock()
	defer watch.mu.Unlock()
	t.Logf("creates at the gateway: %d while OPEN, half-open trials by period %v", watch.whileOpen, watch.trials)
	assert.Zero(t, watch.unread, "creates whose breaker state the watch could not read")
	assert.Zero(t, watch.whileOpen, "creates that reached the gateway while the request breaker was OPEN")
	assert.GreaterOrEqual(t, len(watch.trials), 2, "half-open periods with trials: a failed one, then the one that closed it")
	for gen, n := range watch.trials {
		assert.LessOrEqual(t, n, halfOpenCalls, "creates in the half-open period after open generation %d, fleet-wide", gen)
	}
	for _, addr := range addrs {
		assert.Equal(t, 0.0, breakerState(t, addr, activities.CreateBreakerName), "worker %s sees the request breaker closed", addr)
	}
}

// createWatch stands between the workers and the gateway and files each
// create by the request breaker's fleet state when it arrives. A half-open
// trial runs under the shared lease, which the state is written under, so
// the state read is the one the trial was let through by.
type createWatch struct {
	proxy *httputil.ReverseProxy

	mu        sync.Mutex
	st        *store.Store
	whileOpen int            // creates while the state was OPEN, not yet expired
	trials    map[uint64]int // half-open creates by the generation of the OPEN state they follow
	unread    int            // creates whose state could not be read
	failed    int            // half-open creates the gateway answered 5xx
}

func (w *createWatch) setStore(st *store.Store) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.st = st
}

func (w *createWatch) failedTrials() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

func (w *createWatch) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/api/v1/payments" {
		w.proxy.ServeHTTP(rw, r)
		return
	}
	trial := w.file()
	rec := &statusRecorder{ResponseWriter: rw, code: http.StatusOK}
	w.proxy.ServeHTTP(rec, r)
	if trial && rec.code >= 500 {
		w.mu.Lock()
		w.failed++
		w.mu.Unlock()
	}
}

// statusRecorder keeps the status a response was written with.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

// file files a create by the fleet state it arrived under, and says
// whether it was a half-open trial.
func (w *createWatch) file() (trial bool) {
	w.mu.Lock()
	st := w.st
	w.mu.Unlock()
	if st == nil {
		return false
	}
	data, err := st.ReadBreakerState("gobreaker:state:" + activities.CreateBreakerName)
	var sh gobreaker.SharedState
	if err == nil {
		err = json.Unmarshal(data, &sh)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case err != nil:
		w.unread++
	case sh.State == gobreaker.StateOpen && sh.Expiry.After(time.Now()):
		w.whileOpen++
	case sh.State == gobreaker.StateOpen:
		w.trials[sh.Generation]++
		return true
	case sh.State == gobreaker.StateHalfOpen:
		w.trials[sh.Generation-1]++
		return true
	}
	return false
}
