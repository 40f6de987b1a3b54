package e2e_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/loadgen"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/starter/cli"
	"github.com/payguard/payguard/starter/cli/clitest"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	metricnames "github.com/payguard/payguard/worker/metrics"
	"github.com/payguard/payguard/worker/service"
	"github.com/payguard/payguard/workflows"
)

// The short names every test here uses for the shared helpers of
// internal/testenv and starter/cli/clitest.

func placeOrder(t *testing.T, s *testenv.Stack, orderID, product string, qty int, extra ...string) {
	t.Helper()
	clitest.PlaceOrder(t, s, orderID, product, qty, extra...)
}

func pendingOrder(t *testing.T, orderID string) (*testenv.Stack, store.Order) {
	t.Helper()
	return clitest.PendingOrder(t, orderID)
}

func waitOrder(t *testing.T, s *testenv.Stack, orderID string, want status.Order, within time.Duration) store.Order {
	t.Helper()
	return s.WaitOrder(t, orderID, want, within)
}

func stockOf(t *testing.T, s *testenv.Stack, product string) store.Stock {
	t.Helper()
	return s.Stock(t, product)
}

func setStock(t *testing.T, s *testenv.Stack, product string, qty int64) {
	t.Helper()
	s.SetStock(t, product, qty)
}

func metrics(t *testing.T, s *testenv.Stack) string {
	t.Helper()
	return s.Metrics(t)
}

// quietSlow is a gateway that answers at once and holds every payment
// PENDING for an hour.
func quietSlow() simulator.Faults { return testenv.Processing(time.Hour) }

// slowAnswers is a gateway latency under which every call is answered
// after 3 s: a create stays on the wire long enough for a cancel, a kill
// or a stall to land while it is there.
var slowAnswers = simulator.Range{Min: simulator.Duration(3 * time.Second), Max: simulator.Duration(3 * time.Second)}

// waitsForTheAnswer tunes a stack to wait out slowAnswers (a 10 s read
// timeout) and to poll no sooner than a minute, so only the create's
// answer or a callback moves the order during the test.
func waitsForTheAnswer(c *service.Config) {
	c.ReadTimeout, c.PollInitial, c.PollMax = 10*time.Second, time.Minute, time.Minute
	c.UnknownGrace = 11 * time.Second // above the read timeout (service.Config.Validate)
}

// Helpers of this package's own.

func workflowState(t *testing.T, s *testenv.Stack, orderID string) workflows.State {
	t.Helper()
	resp, err := testenv.Temporal(t).QueryWorkflow(context.Background(), workflows.PaymentWorkflowID(orderID), "", workflows.StateQuery)
	require.NoError(t, err)
	var st workflows.State
	require.NoError(t, resp.Get(&st))
	return st
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

// transitions are the lookup breaker's transitions so far, by "from|to".
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

// breakerState is a breaker's state as the worker at addr sees it (0
// closed, 1 half-open, 2 open; -1 not scraped).
func breakerState(t *testing.T, addr, name string) float64 {
	t.Helper()
	samples, err := metricnames.Scrape(context.Background(), "http://"+addr+"/metrics", metricnames.BreakerCurrentState)
	if err != nil {
		return -1
	}
	for _, s := range samples {
		if s.Labels["breaker"] == name && s.Value == 1 {
			switch s.Labels["state"] {
			case "closed":
				return 0
			case "half-open":
				return 1
			case "open":
				return 2
			}
		}
	}
	return -1
}

// workflowEnd waits up to d for the workflow id to end and returns how it
// ended; the test fails when it is still running.
func workflowEnd(t *testing.T, tc client.Client, id string, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	runErr := tc.GetWorkflow(ctx, id, "").Get(ctx, nil)
	require.NoError(t, ctx.Err(), "workflow %s still running", id)
	t.Logf("workflow ended: %v", runErr)
	return runErr
}

// nonFailure is the workflow's error unless it is an operator's cancel,
// which is an ending like any other.
func nonFailure(err error) error {
	if temporal.IsCanceledError(err) {
		return nil
	}
	return err
}

// requireMoneyAndStockAgree holds an ended order of 2 × P1 (out of 5) to
// one story: CONFIRMED with its charge standing and the stock sold, or
// CANCELLED with no charge and the stock back; and its workflow not failed.
func requireMoneyAndStockAgree(t *testing.T, o store.Order, gw simulator.OrderStats, stock store.Stock, runErr error) {
	t.Helper()
	t.Logf("order %s payment %s reservation %s; gateway %+v; stock %+v", o.Status, o.PaymentStatus, o.Reservation, gw, stock)
	switch o.Status {
	case status.OrderConfirmed:
		assert.Equal(t, 1, gw.Successful, "a CONFIRMED order's charge stands at the gateway")
		assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 3, Sold: 2}, stock)
	case status.OrderCancelled:
		assert.Zero(t, gw.Successful, "a CANCELLED order keeps no charge")
		assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 5}, stock)
	default:
		t.Errorf("order left %s", o.Status)
	}
	assert.NoError(t, nonFailure(runErr), "the workflow must not fail with the order's money and stock apart")
}

// cancelSeen: a workflow task completed after the workflow's cancel
// request, so the workflow code has seen it.
func cancelSeen(t *testing.T, tc client.Client, id string) bool {
	iter := tc.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	requested := false
	for iter.HasNext() {
		e, err := iter.Next()
		require.NoError(t, err)
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED:
			requested = true
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			if requested {
				return true
			}
		}
	}
	return false
}

// searchAttribute reads a keyword search attribute of a workflow as the
// server holds it (its mutable state, not the visibility store).
func searchAttribute(t *testing.T, tc client.Client, id, name string) string {
	t.Helper()
	desc, err := tc.DescribeWorkflow(context.Background(), id, "")
	require.NoError(t, err)
	p, ok := desc.RawResponse.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()[name]
	if !ok {
		return ""
	}
	var v string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(p, &v))
	return v
}

// historySummary lists a workflow's events by type, one a line, with the
// cause of a failed workflow task.
func historySummary(t *testing.T, tc client.Client, id string) string {
	t.Helper()
	var out string
	iter := tc.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		e, err := iter.Next()
		require.NoError(t, err)
		line := e.GetEventType().String()
		if f := e.GetWorkflowTaskFailedEventAttributes(); f != nil {
			line += " " + f.GetCause().String()
		}
		if m := e.GetMarkerRecordedEventAttributes(); m != nil {
			line += " " + m.GetMarkerName()
		}
		out += "  " + line + "\n"
	}
	return out
}

// anomalies are the causes of the anomalies in the order's event log.
func anomalies(t *testing.T, st *store.Store, orderID string) []string {
	t.Helper()
	events, err := st.Events(context.Background(), orderID)
	require.NoError(t, err)
	var out []string
	for _, e := range events {
		if e.Kind == store.KindAnomaly {
			out = append(out, e.Cause)
		}
	}
	return out
}

// openLookupBreaker trips the worker's lookup breaker with lookups of the
// order (its transaction key) against a gateway answering them 503, then
// heals the gateway: the breaker stays open for its OpenFor.
func openLookupBreaker(t *testing.T, s *testenv.Stack, orderID, key string) {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	acts := suite.NewTestActivityEnvironment()
	acts.RegisterActivity(s.Worker.Activities)
	testenv.PatchFaults(t, s.Sim, map[string]any{"lookup": map[string]any{"errorRate": 1, "errorStatus": 503}})
	testenv.Eventually(t, 20*time.Second, func() bool {
		_, _ = acts.ExecuteActivity(s.Worker.Activities.LookupPayment, activities.LookupInput{OrderID: orderID, TransactionKey: key})
		return s.Worker.Breaker.State() == gobreaker.StateOpen
	}, "the lookup breaker opens")
	testenv.PatchFaults(t, s.Sim, map[string]any{"lookup": map[string]any{"errorRate": 0}})
}
