package e2e_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/loadgen"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

func placeOrder(t *testing.T, s *testenv.Stack, orderID, product string, qty int, extra ...string) {
	t.Helper()
	out, err := starter(context.Background(), s, append([]string{"order", "--product", product, "--qty", fmt.Sprint(qty),
		"--amount", "5000", "--order-id", orderID}, extra...)...)
	require.NoError(t, err, out)
}

func waitOrder(t *testing.T, s *testenv.Stack, orderID string, want status.Order, within time.Duration) store.Order {
	t.Helper()
	var o store.Order
	testenv.Eventually(t, within, func() bool {
		var err error
		o, err = s.Store.GetOrder(context.Background(), orderID)
		return err == nil && o.Status == want
	}, fmt.Sprintf("order %s %s", orderID, want))
	return o
}

func stockOf(t *testing.T, s *testenv.Stack, product string) store.Stock {
	t.Helper()
	st, err := s.Store.GetStock(context.Background(), product)
	require.NoError(t, err)
	return st
}

func setStock(t *testing.T, s *testenv.Stack, product string, qty int64) {
	t.Helper()
	_, err := s.Store.SetStock(context.Background(), product, qty)
	require.NoError(t, err)
}

func workflowState(t *testing.T, s *testenv.Stack, orderID string) workflows.State {
	t.Helper()
	resp, err := testenv.Temporal(t).QueryWorkflow(context.Background(), workflows.PaymentWorkflowID(orderID), "", workflows.StateQuery)
	require.NoError(t, err)
	var st workflows.State
	require.NoError(t, resp.Get(&st))
	return st
}

func metrics(t *testing.T, s *testenv.Stack) string {
	t.Helper()
	resp, err := http.Get(s.MetricsURL())
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func transitions(t *testing.T, s *testenv.Stack) map[string]float64 {
	t.Helper()
	m, err := loadgen.ScrapeBreakerTransitions(context.Background(), s.MetricsURL())
	require.NoError(t, err)
	out := map[string]float64{}
	for k, v := range m {
		out[strings.TrimPrefix(k, activities.LookupBreakerName+"|")] = v
	}
	return out
}

func quietSlow() simulator.Faults {
	f := testenv.QuietFaults()
	f.Processing = simulator.Processing{Min: simulator.Duration(time.Hour), Max: simulator.Duration(time.Hour), SuccessRate: 1}
	return f
}
