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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/status"
)

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
}
