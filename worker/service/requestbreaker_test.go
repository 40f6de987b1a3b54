package service_test

import (
	"context"
	"encoding/json"
	"fmt"
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
	metricnames "github.com/payguard/payguard/worker/metrics"
	"github.com/payguard/payguard/worker/service"
)

// Creates during an outage, on the real stack: 5xx creates trip the request
// breaker; while it is open the gateway sees no create at all; once the
// gateway heals the held-back orders resume and every one ends CONFIRMED
// with exactly one transaction — none created twice, none charged twice.
func TestCreatesWaitOutTheRequestBreakerAndResumeOnce(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, processing(100*time.Millisecond), func(c *service.Config) {
		c.RequestBreaker = activities.BreakerSettings{Window: 10 * time.Second, MinCalls: 3, FailureRate: 0.5, OpenFor: 5 * time.Second, HalfOpenCalls: 1}
		// No re-send of an unknown create before the breaker has opened.
		c.UnknownGrace = 5 * time.Second
	})
	setStock(t, s, 100)
	// 503 before the gateway creates anything: each create's outcome is
	// unknown to payguard, and counts against the request breaker.
	testenv.PatchFaults(t, s.Sim, map[string]any{"create": map[string]any{"errorRate": 1, "errorStatus": 503}})
	var orders []string
	place := func(i int) {
		id := fmt.Sprintf("rqbrk-%d", i)
		orders = append(orders, id)
		placeOrder(t, s, id)
	}
	// Three creates one after the other, each counted by the gateway before
	// the next goes out, trip it: no create is in flight when it opens.
	for i := range 3 {
		place(i)
		testenv.Eventually(t, 30*time.Second, func() bool { return s.Sim.Stats().Orders[orders[i]].CreateRequests == 1 }, orders[i]+" create answered")
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return createBreaker(t, s) == 2 }, "request breaker OPEN")
	openSeen := time.Now()
	// Three more orders while it is open.
	for i := 3; i < 6; i++ {
		place(i)
	}

	// While it stays open, nothing reaches the gateway: watched for most of
	// its 5 s (it opened before openSeen; the margin covers that lag, after
	// which one half-open trial may go out).
	sent := s.Sim.Stats().Requests["create"]
	require.Equal(t, 3, sent)
	testenv.Eventually(t, 30*time.Second, func() bool {
		require.Equal(t, sent, s.Sim.Stats().Requests["create"], "a create reached the gateway while the request breaker was open")
		return time.Since(openSeen) > 3500*time.Millisecond
	}, "watched the open request breaker")

	testenv.PatchFaults(t, s.Sim, map[string]any{"create": map[string]any{"errorRate": 0}})
	for _, id := range orders {
		testenv.Eventually(t, time.Minute, func() bool {
			o, err := s.Store.GetOrder(context.Background(), id)
			return err == nil && o.Status == status.OrderConfirmed
		}, id+" CONFIRMED after the gateway healed")
		got := s.Sim.Stats().Orders[id]
		assert.Len(t, got.Transactions, 1, "%s: one transaction at the gateway", id)
		assert.Equal(t, 1, got.Successful, "%s: charged once", id)
	}
	assert.Zero(t, stock(t, s).Reserved)
}

// createBreaker is the request breaker's state as the worker's metrics
// show it: 0 closed, 1 half-open, 2 open.
func createBreaker(t *testing.T, s *testenv.Stack) float64 {
	t.Helper()
	samples, err := metricnames.Scrape(context.Background(), s.MetricsURL(), metricnames.BreakerState)
	require.NoError(t, err)
	for _, sm := range samples {
		if sm.Labels["breaker"] == activities.CreateBreakerName {
			return sm.Value
		}
	}
	return -1
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
			cli.Env{Getenv: func(k string) string { return env[k] }, Stdout: devNull{}, Stderr: devNull{}}))
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
