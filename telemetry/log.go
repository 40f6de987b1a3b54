package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// Log keys of the trace a line belongs to, snake_case as every payguard
// log key, in the hex the trace's UI searches by.
const (
	LogTraceID = "trace_id"
	LogSpanID  = "span_id"
)

// The keys the Temporal SDK's tracing interceptor adds to the workflow's
// and the activities' loggers (workflow.GetLogger, activity.GetLogger),
// whose lines the SDK's slog adapter hands on with no context.
const (
	sdkTraceID = "TraceID"
	sdkSpanID  = "SpanID"
)

// LogHandler wraps h so that each line names the trace it was logged in:
// trace_id and span_id from the context's span (slog's *Context calls), or
// from the Temporal SDK's TraceID and SpanID fields, renamed, for the
// workflow's and the activities' lines. A line with neither is left alone.
func LogHandler(h slog.Handler) slog.Handler {
	if _, ok := h.(*traceHandler); ok {
		return h
	}
	return &traceHandler{next: h}
}

type traceHandler struct {
	next slog.Handler
	// traced: the SDK's fields were added through WithAttrs, so each line
	// already carries the ids.
	traced bool
}

func (h *traceHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.traced {
		return h.next.Handle(ctx, r)
	}
	var attrs []slog.Attr
	sdk := false
	r.Attrs(func(a slog.Attr) bool {
		if b, ok := renamed(a); ok {
			a, sdk = b, true
		}
		attrs = append(attrs, a)
		return true
	})
	sc := trace.SpanContextFromContext(ctx)
	if !sdk && !sc.IsValid() {
		return h.next.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	if !sdk {
		out.AddAttrs(slog.String(LogTraceID, sc.TraceID().String()), slog.String(LogSpanID, sc.SpanID().String()))
	}
	out.AddAttrs(attrs...)
	return h.next.Handle(ctx, out)
}

func (h *traceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(attrs))
	traced := h.traced
	for i, a := range attrs {
		if b, ok := renamed(a); ok {
			a, traced = b, true
		}
		out[i] = a
	}
	return &traceHandler{next: h.next.WithAttrs(out), traced: traced}
}

func (h *traceHandler) WithGroup(name string) slog.Handler {
	return &traceHandler{next: h.next.WithGroup(name), traced: h.traced}
}

// renamed is the SDK's TraceID or SpanID field as trace_id or span_id;
// an id of zeros (no tracer provider installed: the SDK's spans are then
// OpenTelemetry's no-op ones) is dropped, as an empty attribute, which
// slog's handlers skip.
func renamed(a slog.Attr) (slog.Attr, bool) {
	var key string
	switch a.Key {
	case sdkTraceID:
		key = LogTraceID
	case sdkSpanID:
		key = LogSpanID
	default:
		return a, false
	}
	v := a.Value.Resolve()
	text := v.String()
	if s, ok := v.Any().(fmt.Stringer); ok && v.Kind() == slog.KindAny {
		text = s.String()
	}
	if strings.Trim(text, "0") == "" {
		return slog.Attr{}, true
	}
	return slog.String(key, text), true
}
