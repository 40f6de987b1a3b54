package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/worker/service"
	"github.com/payguard/payguard/workflows"
)

// Unsigned callbacks. Under --callback-auth lookup an unsigned callback is
// a hint, and only the gateway's answer to the lookup it triggers decides;
// a flood of them cannot hold an order past its deadline. Signed mode, the
// default, refuses them.

// lookupMode polls only once a minute, so within a test every lookup the
// gateway sees comes from a hint.
func lookupMode(c *service.Config) {
	c.CallbackAuth = service.CallbackAuthLookup
	c.PollInitial, c.PollMax = time.Minute, time.Minute
}

// postUnsigned sends a callback body without X-Timestamp or X-Signature, as
// the Loopers simulator (or anyone) can, and returns the worker's answer.
func postUnsigned(t *testing.T, s *testenv.Stack, tx gateway.TransactionInfo) (int, service.CallbackAnswer) {
	t.Helper()
	body, err := json.Marshal(tx)
	require.NoError(t, err)
	resp, err := http.Post(s.Config.CallbackURL, "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	var a service.CallbackAnswer
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&a))
	return resp.StatusCode, a
}

func TestLookupModeForgedUnsignedSuccessConfirmsNothing(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, quietSlow(), lookupMode)
	setStock(t, s, "P1", 5)
	id := testenv.ID("lk-forged")
	placeOrder(t, s, id, "P1", 2)
	o := waitOrder(t, s, id, status.OrderPending, 30*time.Second)

	// The order's own key and a key the gateway never issued, both claiming
	// SUCCESS. The first brings a lookup forward; the second, within the
	// second, is dropped by the endpoint (store.PassHint). Neither decides
	// anything.
	before := s.Sim.Stats().Requests["lookup"]
	for i, key := range []string{o.TransactionKey, "20990101:TR:f0f0f0"} {
		code, answer := postUnsigned(t, s, gateway.TransactionInfo{TransactionKey: key, OrderID: id, CardType: "KB",
			CardNo: "1234-5678-9012-3456", Amount: 5000, Status: gateway.StatusSuccess})
		require.Equal(t, http.StatusOK, code, "%+v", answer)
		if i == 0 {
			assert.True(t, answer.Accepted, "taken as a hint")
		} else {
			assert.False(t, answer.Accepted, "a repeat within the second")
			assert.Contains(t, answer.Reason, "dropped")
		}
	}
	testenv.Eventually(t, 15*time.Second, func() bool { return s.Sim.Stats().Requests["lookup"] > before },
		"the hint's lookup reached the gateway")
	testenv.Eventually(t, 15*time.Second, func() bool {
		st := workflowState(t, s, id)
		return st.LastLookup != nil && st.LastLookup.Result == gateway.StatusPending
	}, "the gateway's answer, PENDING, recorded")
	got, err := s.Store.GetOrder(t.Context(), id)
	require.NoError(t, err)
	assert.Equal(t, status.OrderPending, got.Status)
	assert.Equal(t, status.PaymentPending, got.PaymentStatus)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 3, Reserved: 2}, stockOf(t, s, "P1"), "no stock sold")
}

func TestLookupModeRealUnsignedCallbackConfirmsThroughALookup(t *testing.T) {
	t.Parallel()
	f := testenv.QuietFaults()
	f.Processing = simulator.Processing{Min: simulator.Duration(200 * time.Millisecond), Max: simulator.Duration(200 * time.Millisecond), SuccessRate: 1}
	sim := testenv.PgsimWith(t, f, func(c *simulator.Config) { c.UnsignedCallbacks = true })
	s := testenv.NewStackOn(t, sim, lookupMode)
	setStock(t, s, "P1", 5)
	id := testenv.ID("lk-real")
	start := time.Now()
	placeOrder(t, s, id, "P1", 2)
	o := waitOrder(t, s, id, status.OrderConfirmed, 20*time.Second)
	took := time.Since(start)
	assert.Less(t, took, time.Minute, "confirmed by the hint's lookup, not by the first poll a minute in")
	assert.Equal(t, status.PaymentSuccess, o.PaymentStatus)
	assert.Positive(t, s.Sim.Stats().Requests["lookup"], "the gateway was asked")
	st := workflowState(t, s, id)
	require.NotNil(t, st.LastLookup)
	assert.Equal(t, gateway.StatusSuccess, st.LastLookup.Result, "a lookup saw the SUCCESS")
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 3, Sold: 2}, stockOf(t, s, "P1"))
	t.Logf("confirmed %.1fs after the order", took.Seconds())
}

func TestLookupModeOpenBreakerMakesTheHintWait(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, quietSlow(), func(c *service.Config) {
		lookupMode(c)
		// Polls every 3 s: after the hint whose lookup the breaker refused,
		// the next lookup is a poll's (or a hint's, once a poll has run).
		c.PollInitial, c.PollMax = 3*time.Second, 3*time.Second
		// One failed lookup opens the breaker.
		c.Breaker = activities.BreakerSettings{Window: 10 * time.Second, MinCalls: 1, FailureRate: 0.5, OpenFor: 2 * time.Second, HalfOpenCalls: 1}
	})
	setStock(t, s, "P1", 5)
	id := testenv.ID("lk-breaker")
	placeOrder(t, s, id, "P1", 2)
	o := waitOrder(t, s, id, status.OrderPending, 30*time.Second)
	// The charge really succeeded, but lookups fail with INTERNAL_ERROR.
	testenv.Resolve(t, s.Sim, o.TransactionKey, "SUCCESS", "", false)
	testenv.PatchFaults(t, s.Sim, map[string]any{"lookup": map[string]any{"errorRate": 1}})
	hint := gateway.TransactionInfo{TransactionKey: o.TransactionKey, OrderID: id, CardType: "KB", CardNo: "1234-5678-9012-3456",
		Amount: 5000, Status: gateway.StatusSuccess}

	code, _ := postUnsigned(t, s, hint)
	require.Equal(t, http.StatusOK, code)
	testenv.Eventually(t, 20*time.Second, func() bool {
		st := workflowState(t, s, id)
		return st.LastLookup != nil && st.LastLookup.Result == "UNAVAILABLE"
	}, "the hint's lookup refused by the open breaker")
	got, err := s.Store.GetOrder(t.Context(), id)
	require.NoError(t, err)
	assert.Equal(t, status.OrderPending, got.Status, "an open breaker concludes nothing, whatever the callback claimed")
	assert.Equal(t, status.PaymentPending, got.PaymentStatus)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 3, Reserved: 2}, stockOf(t, s, "P1"))

	// The gateway recovers and the breaker lets a trial through: the next
	// lookup (a poll's, or the hint's) sees the SUCCESS, and that decides.
	testenv.PatchFaults(t, s.Sim, map[string]any{"lookup": map[string]any{"errorRate": 0}})
	testenv.Eventually(t, 10*time.Second, func() bool { return s.Worker.Breaker.State() != gobreaker.StateOpen }, "breaker no longer open")
	code, _ = postUnsigned(t, s, hint)
	require.Equal(t, http.StatusOK, code)
	o = waitOrder(t, s, id, status.OrderConfirmed, 20*time.Second)
	assert.Equal(t, status.PaymentSuccess, o.PaymentStatus)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 3, Sold: 2}, stockOf(t, s, "P1"))
}

// Signed mode, the default, refuses the same unsigned body outright.
func TestSignedModeRefusesAnUnsignedCallback(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, quietSlow(), func(c *service.Config) { c.PollInitial, c.PollMax = time.Minute, time.Minute })
	setStock(t, s, "P1", 5)
	id := testenv.ID("lk-signed")
	placeOrder(t, s, id, "P1", 1)
	o := waitOrder(t, s, id, status.OrderPending, 30*time.Second)
	code, answer := postUnsigned(t, s, gateway.TransactionInfo{TransactionKey: o.TransactionKey, OrderID: id, Amount: 5000, Status: gateway.StatusSuccess})
	assert.Equal(t, http.StatusUnauthorized, code, "%+v", answer)
	assert.Zero(t, s.Sim.Stats().Requests["lookup"], "no lookup either")
}

// Real stack, --callback-auth lookup: anyone who can reach the callback
// endpoint and knows an order id floods unsigned callbacks. Each is a hint;
// the order must still be compensated at its deadline, not stay PENDING,
// stock held, for as long as the flood lasts.
func TestUnsignedFloodCannotHoldAnOrderPastItsDeadline(t *testing.T) {
	unsignedFlood(t, 300*time.Millisecond) // the simulator's latency: a lookup takes longer than the gap between forgeries
}

func unsignedFlood(t *testing.T, latency time.Duration) {
	f := quietSlow()
	f.Latency = simulator.Range{Min: simulator.Duration(latency), Max: simulator.Duration(latency)}
	s := testenv.NewStack(t, f, lookupMode)
	setStock(t, s, "P1", 5)
	id := testenv.ID("flood")
	placeOrder(t, s, id, "P1", 2, "--deadline", "15s")
	o := waitOrder(t, s, id, status.OrderPending, 30*time.Second)
	start := time.Now()

	body, err := json.Marshal(gateway.TransactionInfo{TransactionKey: o.TransactionKey, OrderID: id, CardType: "KB",
		CardNo: "1234-5678-9012-3456", Amount: 5000, Status: gateway.StatusSuccess})
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var sent atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.Config.CallbackURL, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
					sent.Add(1)
				}
			}
		}()
	}
	defer func() { stop(); wg.Wait() }()

	// The deadline is 15 s; give compensation 30 s more.
	var got status.Order
	testenv.Eventually(t, 45*time.Second, func() bool {
		cur, err := s.Store.GetOrder(context.Background(), id)
		require.NoError(t, err)
		got = cur.Status
		return got.Final()
	}, "the order final despite the flood")
	t.Logf("after %s and %d unsigned callbacks: order %s, gateway lookups %d", time.Since(start).Round(time.Second), sent.Load(),
		got, s.Sim.Stats().Requests["lookup"])
	assert.Equal(t, status.OrderCancelled, got, "order should be compensated by its deadline (15 s) plus compensation time")

	// The endpoint passed on at most one hint a second (store.PassHint):
	// the flood spent a few of the workflow's signals, not thousands.
	stop()
	wg.Wait()
	hints := 0
	iter := testenv.Temporal(t).GetWorkflowHistory(context.Background(), workflows.PaymentWorkflowID(id), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		e, err := iter.Next()
		require.NoError(t, err)
		if e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == workflows.LookupHintSignal {
			hints++
		}
	}
	bound := int(time.Since(start)/service.HintEvery) + 2
	assert.LessOrEqual(t, hints, bound, "hint signals, of %d unsigned callbacks", sent.Load())
	assert.Greater(t, sent.Load(), int64(5*bound), "a flood")
}
