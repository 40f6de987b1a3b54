package breaker_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/breaker"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/store"
)

// The fleet breaker on real components: one PostgreSQL database shared by
// three "workers" (each its own pool and breaker, as three processes would
// have), a real pgsim, the real gateway client.

const stateKey = "gobreaker:state:" + activities.LookupBreakerName

var settings = activities.BreakerSettings{Window: 10 * time.Second, MinCalls: 5, FailureRate: 0.5,
	OpenFor: 2 * time.Second, HalfOpenCalls: 3}

// seen records each worker's view of the breaker.
type seen struct {
	mu      sync.Mutex
	changes []string
	openAt  time.Time
	errs    int
}

func (s *seen) BreakerState(_ string, _, to gobreaker.State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changes = append(s.changes, to.String())
	if to == gobreaker.StateOpen && s.openAt.IsZero() {
		s.openAt = time.Now()
	}
}

func (s *seen) StoreCall(_, _ string, _ time.Duration, err error) {
	if err != nil {
		s.mu.Lock()
		s.errs++
		s.mu.Unlock()
	}
}

func (s *seen) Fallback(string, bool) {}

func openStore(t *testing.T, url string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return st
}

// migrated is a fresh database with payguard's schema: its URL, for the
// workers' own pools, and a store the test reads it through.
func migrated(t *testing.T) (string, *store.Store) {
	t.Helper()
	url := testenv.NewDatabase(t)
	admin := openStore(t, url)
	require.NoError(t, admin.Migrate(context.Background()))
	return url, admin
}

// gatewayWithPayment is a real pgsim holding one payment, and the gateway
// client that created it: lookups of it succeed until pgsim goes down.
func gatewayWithPayment(t *testing.T) (*simulator.Server, *gateway.Client, gateway.Created) {
	t.Helper()
	sim := testenv.Pgsim(t, testenv.QuietFaults())
	client, err := gateway.New(gateway.Config{BaseURL: sim.GatewayURL(), ConnectTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(client.Close)
	created, err := client.CreatePayment(context.Background(), gateway.CreateRequest{OrderID: "order-1", Amount: 5000,
		CardType: "SAMSUNG", CardNo: "1234-5678-9814-1451", CallbackURL: "http://127.0.0.1:1/cb"}, "", "")
	require.NoError(t, err)
	return sim, client, created
}

func TestFleetTripsOnceAndRecoversTogether(t *testing.T) {
	url, admin := migrated(t)
	sim, client, created := gatewayWithPayment(t)

	const workers = 3
	var fleet [workers]*breaker.Breaker
	var views [workers]*seen
	for i := range fleet {
		views[i] = &seen{}
		fleet[i] = breaker.New(activities.LookupRules(settings), openStore(t, url).SharedBreakers(2*time.Second), views[i], testenv.Logger(t))
		t.Cleanup(fleet[i].Close)
	}

	// A call is a trial when the fleet's stored state is half-open while it
	// runs, or open past its expiry (gobreaker writes half-open only after
	// the first trial): trials run under the lease, so nobody writes
	// meanwhile. A call that set out just before the breaker tripped finds
	// it open, not yet expired: no trial.
	var trials atomic.Int32
	lookup := func() error {
		data, err := admin.ReadBreakerState(stateKey)
		require.NoError(t, err)
		if st := decodeState(t, data); st.State == gobreaker.StateHalfOpen || st.State == gobreaker.StateOpen && !st.Expiry.After(time.Now()) {
			trials.Add(1)
		}
		_, err = client.Payment(context.Background(), created.TransactionKey)
		return err
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, b := range fleet {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					_ = b.Do(lookup)
				}
			}
		}()
	}
	t.Cleanup(func() { close(stop); wg.Wait() })

	before := sim.Stats().Requests["lookup"]
	testenv.PatchFaults(t, sim, map[string]any{"lookup": map[string]any{"errorRate": 1, "errorStatus": 503}})
	testenv.Eventually(t, 10*time.Second, func() bool {
		for _, b := range fleet {
			if b.State() != gobreaker.StateOpen {
				return false
			}
		}
		return true
	}, "every worker sees the breaker open")
	failed := sim.Stats().Requests["lookup"] - before
	// The window holds no failure when the gateway dies, so the first
	// lookups run side by side, one per worker; from the first failure on
	// they run one at a time.
	assert.LessOrEqual(t, failed, int(settings.MinCalls)+workers-1, "one trip's worth of lookups reached the dead gateway, not one per worker")
	first, last := views[0].openAt, views[0].openAt
	for _, v := range views[1:] {
		v.mu.Lock()
		first, last = minTime(first, v.openAt), maxTime(last, v.openAt)
		v.mu.Unlock()
	}
	assert.LessOrEqual(t, last.Sub(first), time.Second, "the first trip opened the breaker in every worker within a second")

	testenv.PatchFaults(t, sim, map[string]any{"lookup": map[string]any{"errorRate": 0}})
	testenv.Eventually(t, 10*time.Second, func() bool {
		for _, b := range fleet {
			if b.State() != gobreaker.StateClosed {
				return false
			}
		}
		return true
	}, "every worker sees the breaker closed again")
	assert.LessOrEqual(t, trials.Load(), int32(settings.HalfOpenCalls), "half-open trials across the fleet")
	assert.GreaterOrEqual(t, trials.Load(), int32(settings.HalfOpenCalls), "all trials must succeed to close")
	for i, v := range views {
		v.mu.Lock()
		assert.Zero(t, v.errs, "worker %d: no shared-store errors", i)
		assert.Equal(t, []string{"open", "half-open", "closed"}, compact(v.changes), "worker %d's view", i)
		v.mu.Unlock()
	}
}

// compact drops the half-open a worker may not have seen between two reads.
func compact(changes []string) []string {
	out := []string{}
	for _, c := range changes {
		if c == "half-open" {
			continue
		}
		if len(out) == 0 || out[len(out)-1] != c {
			out = append(out, c)
		}
	}
	if len(out) == 2 {
		out = []string{out[0], "half-open", out[1]}
	}
	return out
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func decodeState(t *testing.T, data []byte) gobreaker.SharedState {
	t.Helper()
	var st gobreaker.SharedState
	if len(data) > 0 {
		require.NoError(t, json.Unmarshal(data, &st))
	}
	return st
}

// TestLeaseHolderProcess is the process the next test SIGKILLs while it
// holds the lookup breaker's lease; it is not a test of its own.
func TestLeaseHolderProcess(t *testing.T) {
	url := os.Getenv("PAYGUARD_LEASE_HOLDER_DB")
	if url == "" {
		t.Skip("run by TestCrashedLeaseHolderStallsNobodyBeyondTheLease")
	}
	st, err := store.Open(context.Background(), url)
	require.NoError(t, err)
	h := st.BreakerHandle(2*time.Second, nil)
	require.NoError(t, h.Lock("gobreaker:mutex:"+activities.LookupBreakerName))
	os.Stdout.WriteString("held\n")
	select {}
}

func TestCrashedLeaseHolderStallsNobodyBeyondTheLease(t *testing.T) {
	url, admin := migrated(t)
	// One worker builds the breaker's state, then another process takes
	// the lease and dies holding it.
	first := breaker.New(activities.LookupRules(settings), openStore(t, url).SharedBreakers(2*time.Second), &seen{}, testenv.Logger(t))
	t.Cleanup(first.Close)

	cmd := exec.Command(os.Args[0], "-test.run=^TestLeaseHolderProcess$")
	cmd.Env = append(os.Environ(), "PAYGUARD_LEASE_HOLDER_DB="+url)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "held\n", line)
	var holders int
	require.NoError(t, admin.Pool().QueryRow(context.Background(), `SELECT count(*) FROM breaker_leases WHERE expires_at > now()`).Scan(&holders))
	require.Equal(t, 1, holders, "the child holds the lease")
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()

	// While the dead holder's lease lasts, every call is answered — run,
	// its outcome not counted, or refused — and none waits it out; once it
	// has run out, the fleet counts again: two failures reach the shared
	// state (the second, which may trip it, under the lease).
	testenv.Eventually(t, 2*time.Second+3*time.Second, func() bool {
		_ = first.Do(func() error { return gateway.ErrUnreachable })
		return first.Counts().TotalFailures >= 2
	}, "the fleet counts again once the dead holder's lease has run out")
}

type fallbacks struct {
	seen
	on atomic.Int32
}

func (f *fallbacks) Fallback(_ string, on bool) {
	if on {
		f.on.Add(1)
	}
}

// A shared store that fails leaves an open breaker open until its expiry
// (never "closed"), then this worker decides with its own process breaker.
func TestSharedStoreOutageFallsBackToTheProcessBreaker(t *testing.T) {
	_, st := migrated(t)
	view := &fallbacks{}
	b := breaker.New(activities.LookupRules(settings), st.SharedBreakers(2*time.Second), view, testenv.Logger(t))
	t.Cleanup(b.Close)
	for range settings.MinCalls {
		require.ErrorIs(t, b.Do(func() error { return gateway.ErrUnreachable }), gateway.ErrUnreachable)
	}
	require.Equal(t, gobreaker.StateOpen, b.State())

	st.Close() // the shared store is gone
	called := false
	err := b.Do(func() error { called = true; return nil })
	var open *breaker.OpenError
	require.ErrorAs(t, err, &open, "still open: the state seen stays until its expiry")
	assert.False(t, called)
	assert.Greater(t, open.RetryAfter, time.Duration(0))

	testenv.Eventually(t, 10*time.Second, func() bool { return view.on.Load() > 0 }, "the worker falls back to its own breaker")
	testenv.Eventually(t, 10*time.Second, func() bool { return b.Do(func() error { return nil }) == nil }, "the process breaker lets calls through once the open state expired")
}
