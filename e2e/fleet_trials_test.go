package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
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
)

// The request breaker across three worker processes, its half-open trials
// answered as slowly as the gateway client allows: creates that cannot
// reach the gateway trip it; while it is OPEN the gateway sees no create
// from any worker; in each half-open period — one whose trial fails, the
// gateway still down, then one whose slow trials succeed and close it —
// the creates that reach the gateway fleet-wide are at most
// --request-breaker-half-open-calls, and never two at once: a second trial
// does not start while the first still waits for its answer. Every order
// then ends CONFIRMED with exactly one transaction.
func TestThreeWorkersBoundTheRequestBreakersSlowTrials(t *testing.T) {
	t.Parallel()
	const (
		halfOpenCalls = 2
		connect       = 200 * time.Millisecond
		read          = 3 * time.Second
	)
	sim := testenv.Pgsim(t, testenv.QuietFaults())
	gw := newFront(t, sim.GatewayURL(), read-300*time.Millisecond)
	t.Cleanup(func() {
		gw.mu.Lock()
		defer gw.mu.Unlock()
		t.Logf("creates at the gateway: %d while OPEN, half-open trials by period %v, at most %d at once", gw.whileOpen, gw.trials, gw.mostInFlight)
	})
	env, addrs := startWorkers(t, gw.url(), "--poll-initial", "200ms", "--poll-max", "500ms", "--breaker-scope", "fleet",
		"--connect-timeout", connect.String(), "--read-timeout", read.String(),
		"--request-breaker-min-calls", "3", "--request-breaker-open", "3s", "--request-breaker-half-open-calls", fmt.Sprint(halfOpenCalls),
		"--unknown-grace", "3500ms", "--request-attempts", "20")
	ctx := context.Background()
	st, err := store.Open(ctx, env["DATABASE_URL"])
	require.NoError(t, err)
	t.Cleanup(st.Close)
	gw.setStore(st)
	_, err = st.SetStock(ctx, "P1", 100)
	require.NoError(t, err)
	var orders []string
	place := func(i int) {
		id := fmt.Sprintf("slow-trials-%d", i)
		orders = append(orders, id)
		require.NoError(t, cli.Run(ctx, []string{"order", "--product", "P1", "--qty", "1", "--amount", "5000", "--order-id", id},
			cli.Env{Getenv: func(k string) string { return env[k] }, Stdout: io.Discard, Stderr: io.Discard}))
	}

	gw.down()
	for i := range 3 {
		place(i)
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
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
	// The gateway still down, a half-open period's trial fails and opens
	// the breaker again; then it comes back, answering slowly, and the next
	// period's trials close it.
	testenv.Eventually(t, 30*time.Second, func() bool { return failedTrials(t, addrs) >= 1 }, "a failed half-open trial")
	gw.up(true)
	testenv.Eventually(t, 90*time.Second, func() bool {
		for _, addr := range addrs {
			if breakerState(t, addr, activities.CreateBreakerName) != 0 {
				return false
			}
		}
		return true
	}, "every worker sees the request breaker closed")
	gw.mu.Lock()
	assert.Zero(t, gw.unread, "creates whose breaker state the front could not read")
	assert.Zero(t, gw.whileOpen, "creates that reached the gateway while the request breaker was OPEN")
	assert.NotEmpty(t, gw.trials, "half-open trials reached the gateway")
	for gen, n := range gw.trials {
		assert.LessOrEqual(t, n, halfOpenCalls, "creates in the half-open period after open generation %d, fleet-wide", gen)
	}
	assert.Equal(t, 1, gw.mostInFlight, "half-open trials at the gateway at once")
	gw.mu.Unlock()

	gw.up(false)
	for _, id := range orders {
		testenv.Eventually(t, time.Minute, func() bool {
			o, err := st.GetOrder(ctx, id)
			return err == nil && o.Status == status.OrderConfirmed
		}, id+" CONFIRMED")
		got := sim.Stats().Orders[id]
		assert.Len(t, got.Transactions, 1, "%s: one transaction at the gateway", id)
		assert.Equal(t, 1, got.Successful, "%s: charged once", id)
	}
}

// failedTrials counts the request breaker's half-open periods whose trial
// failed, as the workers' metrics show them.
func failedTrials(t *testing.T, addrs []string) float64 {
	t.Helper()
	var n float64
	for _, addr := range addrs {
		samples, err := metricnames.Scrape(context.Background(), "http://"+addr+"/metrics", metricnames.BreakerTransitions)
		if err != nil {
			continue
		}
		for _, s := range samples {
			if s.Labels["breaker"] == activities.CreateBreakerName && s.Labels["from"] == gobreaker.StateHalfOpen.String() &&
				s.Labels["to"] == gobreaker.StateOpen.String() {
				n += s.Value
			}
		}
	}
	return n
}

// front stands between the workers and the gateway, on an address of its
// own. Down, its listener is closed: every call is refused a connection.
// Slow, it answers each create as late as the gateway client still takes
// it: the headers after slowBy, then the body after slowBy again, each
// within the client's read timeout. It files each create by the request
// breaker's fleet state when it arrives: a half-open trial runs under the
// shared lease, which the state is written under, so the state read is the
// one the trial was let through by.
type front struct {
	t      *testing.T
	addr   string
	proxy  *httputil.ReverseProxy
	slowBy time.Duration

	mu           sync.Mutex
	srv          *http.Server
	slow         bool
	st           *store.Store
	whileOpen    int            // creates while the state was OPEN, not yet expired
	trials       map[uint64]int // half-open creates by the generation of the OPEN state they follow
	inFlight     int            // half-open creates at the gateway now
	mostInFlight int
	unread       int // creates whose state could not be read
}

func newFront(t *testing.T, gatewayURL string, slowBy time.Duration) *front {
	t.Helper()
	target, err := url.Parse(gatewayURL)
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &front{t: t, addr: l.Addr().String(), proxy: httputil.NewSingleHostReverseProxy(target), slowBy: slowBy, trials: map[uint64]int{}}
	f.serve(l)
	t.Cleanup(f.down)
	return f
}

func (f *front) url() string { return "http://" + f.addr }

func (f *front) serve(l net.Listener) {
	f.srv = &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second}
	go func(srv *http.Server) { _ = srv.Serve(l) }(f.srv)
}

// down closes the listener and every connection.
func (f *front) down() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.srv != nil {
		_ = f.srv.Close()
		f.srv = nil
	}
}

// up listens again on the same address, answering creates slowly or not.
func (f *front) up(slow bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.slow = slow
	if f.srv == nil {
		l, err := net.Listen("tcp", f.addr)
		require.NoError(f.t, err)
		f.serve(l)
	}
}

func (f *front) setStore(st *store.Store) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st = st
}

func (f *front) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/api/v1/payments" {
		f.proxy.ServeHTTP(rw, r)
		return
	}
	if f.file() {
		defer func() {
			f.mu.Lock()
			f.inFlight--
			f.mu.Unlock()
		}()
	}
	f.mu.Lock()
	slow := f.slow
	f.mu.Unlock()
	if !slow {
		f.proxy.ServeHTTP(rw, r)
		return
	}
	answer := httptest.NewRecorder()
	f.proxy.ServeHTTP(answer, r)
	wait := func() bool {
		select {
		case <-r.Context().Done():
			return false
		case <-time.After(f.slowBy):
			return true
		}
	}
	if !wait() {
		return
	}
	for k, v := range answer.Header() {
		rw.Header()[k] = v
	}
	rw.WriteHeader(answer.Code)
	http.NewResponseController(rw).Flush()
	if wait() {
		_, _ = rw.Write(answer.Body.Bytes())
	}
}

// file files a create by the fleet state it arrived under, and says
// whether it was a half-open trial (then counted in flight).
func (f *front) file() (trial bool) {
	f.mu.Lock()
	st := f.st
	f.mu.Unlock()
	if st == nil {
		return false
	}
	data, err := st.ReadBreakerState("gobreaker:state:" + activities.CreateBreakerName)
	var sh gobreaker.SharedState
	if err == nil {
		err = json.Unmarshal(data, &sh)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case err != nil:
		f.unread++
		return false
	case sh.State == gobreaker.StateOpen && sh.Expiry.After(time.Now()):
		f.whileOpen++
		return false
	case sh.State == gobreaker.StateOpen:
		f.trials[sh.Generation]++
	case sh.State == gobreaker.StateHalfOpen:
		f.trials[sh.Generation-1]++
	default:
		return false
	}
	f.inFlight++
	f.mostInFlight = max(f.mostInFlight, f.inFlight)
	return true
}
