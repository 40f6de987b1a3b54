package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	sdklog "go.temporal.io/sdk/log"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/starter/cli"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/telemetry"
	"github.com/payguard/payguard/worker/service"
	"github.com/payguard/payguard/workflows"
)

// logLines decodes JSON log lines.
func logLines(t *testing.T, text string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// The handler names the trace from a line's context, renames the Temporal
// SDK's fields, and leaves an untraced line alone.
func TestLogHandlerNamesTheTrace(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(telemetry.LogHandler(slog.NewJSONHandler(&buf, nil)))
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}))

	logger.InfoContext(ctx, "with a span", "order_id", "o1")
	// As the SDK's tracing interceptor does to activity.GetLogger's logger.
	sdklog.With(sdklog.NewStructuredLogger(logger), "TraceID", tid, "SpanID", sid).Info("from the sdk", "order_id", "o2")
	logger.Info("untraced")
	// With no tracer provider the SDK's spans are no-op ones, of zero ids.
	sdklog.With(sdklog.NewStructuredLogger(logger), "TraceID", trace.TraceID{}, "SpanID", trace.SpanID{}).Info("untraced sdk")
	lines := logLines(t, buf.String())
	if len(lines) != 4 {
		t.Fatalf("%d lines: %s", len(lines), buf.String())
	}
	for _, l := range lines[:2] {
		if l["trace_id"] != tid.String() || l["span_id"] != sid.String() {
			t.Errorf("%v: want trace_id %s span_id %s", l, tid, sid)
		}
		if _, ok := l["TraceID"]; ok {
			t.Errorf("%v: the SDK's key is renamed, not kept", l)
		}
	}
	for _, l := range lines[2:] {
		for _, k := range []string{"trace_id", "span_id", "TraceID", "SpanID", ""} {
			if _, ok := l[k]; ok {
				t.Errorf("an untraced line has %q: %v", k, l)
			}
		}
	}
	if telemetry.LogHandler(logger.Handler()) != logger.Handler() {
		t.Error("wrapping twice adds a second layer")
	}
}

// lockedBuffer is a log sink the worker and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A real worker's lines about an order carry that order's trace: the
// workflow's (its answer) and an activity's (a cancel at the gateway),
// each with the id of a span of the trace.
func TestWorkerLogsCarryTheOrdersTrace(t *testing.T) {
	testenv.NeedsServices(t, "PostgreSQL and the Temporal dev server")
	rec := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))

	s := testenv.NewStack(t, testenv.Processing(time.Hour), func(c *service.Config) { c.PollInitial, c.PollMax = time.Minute, time.Minute })
	s.SetStock(t, "P1", 5)
	// The stack's worker gives way to one that logs JSON here.
	if err := s.Worker.Stop(); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	cfg := s.Config
	l := testenv.Listen(t)
	cfg.Listener, cfg.HTTPAddr, cfg.CallbackURL = l, l.Addr().String(), "http://"+l.Addr().String()+"/callbacks/gateway"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := service.Start(ctx, cfg, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop() })

	place := func(id string, extra ...string) {
		var out bytes.Buffer
		args := append([]string{"order", "--product", "P1", "--qty", "1", "--amount", "500", "--order-id", id}, extra...)
		if err := cli.Run(context.Background(), args, cli.Env{Getenv: s.Getenv, Stdout: &out, Stderr: &out}); err != nil {
			t.Fatalf("order %s: %v\n%s", id, err, out.String())
		}
	}
	place("logged-ok")
	o := s.WaitOrder(t, "logged-ok", status.OrderPending, 30*time.Second)
	testenv.Resolve(t, s.Sim, o.TransactionKey, "SUCCESS", "", true)
	s.WaitOrder(t, "logged-ok", status.OrderConfirmed, 30*time.Second)
	place("logged-late", "--deadline", "2s")
	s.WaitOrder(t, "logged-late", status.OrderCancelled, 30*time.Second)

	for _, c := range []struct{ order, msg string }{
		{"logged-ok", "definitive answer"},      // the workflow's logger
		{"logged-late", "cancelled at gateway"}, // an activity's
	} {
		var line map[string]any
		testenv.Eventually(t, 30*time.Second, func() bool {
			for _, l := range logLines(t, logs.String()) {
				if l["msg"] == c.msg && l["order_id"] == c.order {
					line = l
					return true
				}
			}
			return false
		}, c.msg+" logged for "+c.order)
		var tid trace.TraceID
		testenv.Eventually(t, 30*time.Second, func() bool {
			var ok bool
			tid, ok = traceOf(rec.Ended(), workflows.PaymentWorkflowID(c.order))
			return ok && line["trace_id"] == tid.String() && spanIn(rec, tid, line["span_id"])
		}, c.order+": the line's trace_id and span_id are of the order's trace")
	}
}

// spanIn reports whether a recorded span of trace tid (ended or not yet,
// read again until it has) has the id hex.
func spanIn(rec *tracetest.SpanRecorder, tid trace.TraceID, hex any) bool {
	for _, sp := range rec.Ended() {
		if sp.SpanContext().TraceID() == tid && sp.SpanContext().SpanID().String() == hex {
			return true
		}
	}
	return false
}
