package telemetry_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/payguard/payguard/api/httpapi"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/starter/cli"
	"github.com/payguard/payguard/workflows"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// Each order placed with the starter or the HTTP API is one trace, from the starter's
// StartWorkflow through the workflow and its activities to the gateway call,
// pgsim's handling of it, and pgsim's callback back into the workflow — on
// the real dev server, PostgreSQL and pgsim, with spans caught in process.
func TestOneTracePerOrder(t *testing.T) {
	testenv.NeedsServices(t, "PostgreSQL and the Temporal dev server")
	rec := tracetest.NewSpanRecorder()
	// The tests in this package run one at a time, each with a recorder
	// of its own.
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))

	f := testenv.QuietFaults()
	f.Processing = simulator.Processing{Min: simulator.Duration(100 * time.Millisecond), Max: simulator.Duration(100 * time.Millisecond), SuccessRate: 1}
	s := testenv.NewStack(t, f, nil)
	_, err := s.Store.SetStock(context.Background(), "P1", 10)
	if err != nil {
		t.Fatal(err)
	}
	orders := []string{"trace-0001", "trace-0002"}
	for _, id := range orders[:2] {
		var out bytes.Buffer
		err := cli.Run(context.Background(), []string{"order", "--product", "P1", "--qty", "1", "--amount", "500", "--order-id", id, "--wait", "--json"},
			cli.Env{Getenv: s.Getenv, Stdout: &out, Stderr: &out})
		if err != nil {
			t.Fatalf("order %s: %v\n%s", id, err, out.String())
		}
	}

	// And one through the HTTP order API: its trace begins at the request.
	api := s.StartAPI(t, nil)
	body := `{"orderId":"trace-api-01","productId":"P1","quantity":1,"amount":500,"cardType":"KB","cardNo":"1234-5678-9814-1451"}`
	req, err := http.NewRequest(http.MethodPost, "http://"+api.Addr()+"/api/v1/orders", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(httpapi.HeaderUser, "user-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /api/v1/orders: HTTP %d", resp.StatusCode)
	}
	orders = append(orders, "trace-api-01")

	// Every span of a trace ends by the time the callback's signal is
	// handled and the workflow's last task is done; wait for them.
	want := []string{"StartWorkflow:" + workflows.PaymentWorkflowName, "RunWorkflow:" + workflows.PaymentWorkflowName,
		"StartActivity:Reserve", "RunActivity:Reserve", "RunActivity:RequestPayment", "gateway POST", "pgsim POST",
		"pgsim callback POST", "callback POST", "SignalWorkflow:" + workflows.CallbackSignal, "HandleSignal:" + workflows.CallbackSignal,
		"RunActivity:Settle"}
	traces := map[string]trace.TraceID{}
	var missing string
	defer func() {
		if t.Failed() {
			t.Log("last seen:", missing)
		}
	}()
	testenv.Eventually(t, 30*time.Second, func() bool {
		missing = ""
		for _, id := range orders {
			tid, ok := traceOf(rec.Ended(), workflows.PaymentWorkflowID(id))
			if !ok {
				missing = "no StartWorkflow span for " + id
				return false
			}
			traces[id] = tid
			names := namesIn(rec.Ended(), tid)
			for _, n := range want {
				if !slices.Contains(names, n) {
					missing = fmt.Sprintf("%s: no %q span in its trace (has %v)", id, n, names)
					return false
				}
			}
		}
		return true
	}, "every expected span in each order's trace")
	if traces[orders[0]] == traces[orders[1]] || traces[orders[1]] == traces[orders[2]] {
		t.Fatal("two orders share one trace")
	}

	// One trace per order: every span that names the order's workflow is in
	// its trace, and the HTTP spans hang where they should.
	for _, id := range orders {
		tid := traces[id]
		for _, sp := range rec.Ended() {
			if attr(sp, "temporalWorkflowID") == workflows.PaymentWorkflowID(id) && sp.SpanContext().TraceID() != tid {
				t.Errorf("%s: span %s is in another trace", id, sp.Name())
			}
		}
		parentOf := func(name string) string {
			for _, sp := range rec.Ended() {
				if sp.SpanContext().TraceID() == tid && sp.Name() == name {
					return nameOf(rec.Ended(), sp.Parent().SpanID())
				}
			}
			return ""
		}
		parents := map[string]string{"gateway POST": "RunActivity:RequestPayment", "pgsim POST": "gateway POST",
			"callback POST": "pgsim callback POST", "SignalWorkflow:" + workflows.CallbackSignal: "callback POST"}
		if id == "trace-api-01" {
			parents["StartWorkflow:"+workflows.PaymentWorkflowName] = "api POST"
		}
		for child, parent := range parents {
			if got := parentOf(child); got != parent {
				t.Errorf("%s: the parent of %q is %q, want %q", id, child, got, parent)
			}
		}
	}
}

func traceOf(spans []sdktrace.ReadOnlySpan, workflowID string) (trace.TraceID, bool) {
	for _, sp := range spans {
		if sp.Name() == "StartWorkflow:"+workflows.PaymentWorkflowName && attr(sp, "temporalWorkflowID") == workflowID {
			return sp.SpanContext().TraceID(), true
		}
	}
	return trace.TraceID{}, false
}

func namesIn(spans []sdktrace.ReadOnlySpan, tid trace.TraceID) []string {
	var names []string
	for _, sp := range spans {
		if sp.SpanContext().TraceID() == tid {
			names = append(names, sp.Name())
		}
	}
	return names
}

func nameOf(spans []sdktrace.ReadOnlySpan, id trace.SpanID) string {
	for _, sp := range spans {
		if sp.SpanContext().SpanID() == id {
			return sp.Name()
		}
	}
	return ""
}

func attr(sp sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range sp.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.AsString()
		}
	}
	return ""
}
