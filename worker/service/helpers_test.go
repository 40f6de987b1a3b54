package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/starter/cli"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/worker/service"
)

// Helpers of the worker's tests on the real stack: orders placed and read
// through the starter and the store, callbacks posted, metrics scraped.

func processing(d time.Duration) simulator.Faults {
	f := testenv.QuietFaults()
	f.Processing = simulator.Processing{Min: simulator.Duration(d), Max: simulator.Duration(d), SuccessRate: 1}
	return f
}

func setStock(t *testing.T, s *testenv.Stack, qty int64) {
	_, err := s.Store.SetStock(context.Background(), "P1", qty)
	require.NoError(t, err)
}

func placeOrder(t *testing.T, s *testenv.Stack, orderID string, extra ...string) cli.Started {
	t.Helper()
	out, err := starter(context.Background(), s, append([]string{"order", "--product", "P1", "--qty", "2", "--amount", "5000",
		"--order-id", orderID, "--json"}, extra...)...)
	require.NoError(t, err, out)
	var started cli.Started
	require.NoError(t, json.Unmarshal([]byte(out), &started))
	return started
}

// pendingOrder starts a stack on which only a callback can answer in time
// (the gateway holds every payment an hour and the first poll is a minute
// away), places orderID on it and waits until the order is PENDING.
func pendingOrder(t *testing.T, orderID string) (*testenv.Stack, store.Order) {
	t.Helper()
	s := testenv.NewStack(t, processing(time.Hour), func(c *service.Config) { c.PollInitial, c.PollMax = time.Minute, time.Minute })
	setStock(t, s, 5)
	placeOrder(t, s, orderID)
	return s, waitStatus(t, s, orderID, status.OrderPending)
}

func waitStatus(t *testing.T, s *testenv.Stack, orderID string, want status.Order) store.Order {
	t.Helper()
	var o store.Order
	testenv.Eventually(t, 30*time.Second, func() bool {
		var err error
		o, err = s.Store.GetOrder(context.Background(), orderID)
		return err == nil && o.Status == want
	}, fmt.Sprintf("order %s %s (last: %s)", orderID, want, o.Status))
	return o
}

func stock(t *testing.T, s *testenv.Stack) store.Stock {
	st, err := s.Store.GetStock(context.Background(), "P1")
	require.NoError(t, err)
	return st
}

func metrics(t *testing.T, s *testenv.Stack) string {
	resp, err := http.Get(s.MetricsURL())
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func postCallback(t *testing.T, s *testenv.Stack, body []byte, secret string, at time.Time) (int, service.CallbackAnswer) {
	t.Helper()
	code, raw, err := cli.PostCallback(context.Background(), s.Config.CallbackURL, []byte(secret), body, at)
	require.NoError(t, err)
	var a service.CallbackAnswer
	b, _ := json.Marshal(raw)
	require.NoError(t, json.Unmarshal(b, &a))
	return code, a
}

// orderView runs a starter command that prints an order (--json) and
// decodes what it printed; out is the raw output.
func orderView(t *testing.T, s *testenv.Stack, args ...string) (cli.OrderView, string) {
	t.Helper()
	out, err := starter(context.Background(), s, args...)
	require.NoError(t, err, out)
	var v cli.OrderView
	require.NoError(t, json.Unmarshal([]byte(out), &v))
	return v, out
}

func callbackBody(orderID, key, st string, amount int64) []byte {
	b, _ := json.Marshal(gateway.Transaction{TransactionKey: key, OrderID: orderID, Amount: amount, Status: st})
	return b
}

// lockedWriter lets the logger and the test share a buffer safely.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
