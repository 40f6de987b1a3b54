// Package telemetry holds payguard's OpenTelemetry wiring, so every process
// sets it up the same way (docs/design.md §5):
//
//   - traces: one trace per order — the starter's StartWorkflow, the
//     workflow, its activities (the Temporal SDK's own tracing interceptor),
//     the gateway HTTP call and pgsim's handling of it (otelhttp), and
//     pgsim's callback back to the worker — exported when
//     OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_TRACES_EXPORTER) is set, by the
//     exporter the standard variables choose (contrib's autoexport: OTLP
//     over HTTP by default, gRPC, console), and nothing otherwise; the
//     resource is the SDK's detection (OTEL_SERVICE_NAME,
//     OTEL_RESOURCE_ATTRIBUTES), each program's name the default;
//   - the Temporal SDK's metrics, through the SDK's contrib handler and the
//     OpenTelemetry Prometheus exporter, into the worker's registry.
//
// Everything here reads the global tracer provider when it traces, so a
// process that never calls Setup (or a test that installs a recorder)
// decides where spans go in one place.
package telemetry

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

// EndpointEnv is the standard OpenTelemetry variable that turns export on:
// the OTLP collector's base URL (over HTTP, traces go to its /v1/traces).
const EndpointEnv = "OTEL_EXPORTER_OTLP_ENDPOINT"

// The other standard variables Setup reads to decide whether to trace: a
// traces-only endpoint, or an exporter named (OTEL_TRACES_EXPORTER=console
// traces to stdout with no collector; none turns tracing off).
const (
	TracesEndpointEnv = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	TracesExporterEnv = "OTEL_TRACES_EXPORTER"
)

// propagator carries the trace between processes: W3C trace context in HTTP
// headers and in Temporal's headers, and baggage beside it.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Setup installs the process's tracer provider, whose service.name is
// service unless OTEL_SERVICE_NAME (or service.name in
// OTEL_RESOURCE_ATTRIBUTES) says otherwise. With neither an endpoint nor an
// exporter in getenv nothing is exported: the global provider stays
// OpenTelemetry's no-op, and an untraced process pays next to nothing. The
// exporter and the resource then read the process's environment, as the
// OpenTelemetry SDK does. The returned function flushes and stops the
// exporter.
func Setup(ctx context.Context, service string, getenv func(string) string) (func(context.Context) error, error) {
	otel.SetTextMapPropagator(propagator)
	tp, err := newProvider(ctx, service, getenv)
	if err != nil || tp == nil {
		return func(context.Context) error { return nil }, err
	}
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

// Serve is a long-running program's life (the API's, the worker's): a JSON
// logger at level on stdout, tracing set up as service, the program started
// with that logger, and stopped with the stop start returned once ctx ends.
func Serve(ctx context.Context, service string, level slog.Leveler, getenv func(string) string, stdout io.Writer,
	start func(*slog.Logger) (stop func() error, err error)) error {
	logger := slog.New(slog.NewJSONHandler(stdout, &slog.HandlerOptions{Level: level}))
	stopTracing, err := Setup(ctx, service, getenv)
	if err != nil {
		return err
	}
	defer func() { _ = stopTracing(context.Background()) }()
	stop, err := start(logger)
	if err != nil {
		return err
	}
	<-ctx.Done()
	return stop()
}

// newProvider is Setup's tracer provider, nil when nothing is to be
// exported.
func newProvider(ctx context.Context, service string, getenv func(string) string) (*sdktrace.TracerProvider, error) {
	endpoint := getenv(EndpointEnv)
	if endpoint == "" && getenv(TracesEndpointEnv) == "" && getenv(TracesExporterEnv) == "" {
		return nil, nil
	}
	if endpoint != "" && !strings.HasPrefix(endpoint, "http://") && !strings.HasPrefix(endpoint, "https://") {
		return nil, fmt.Errorf("%s=%q: want the collector's http(s)://host:port", EndpointEnv, endpoint)
	}
	exp, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, fmt.Errorf("trace exporter: %w", err)
	}
	if autoexport.IsNoneSpanExporter(exp) {
		return nil, nil
	}
	res, err := Resource(ctx, service)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, err
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// Resource describes this process to the collector: service.name is
// service, the program's own name, unless the environment names another
// (OTEL_SERVICE_NAME, then OTEL_RESOURCE_ATTRIBUTES: the SDK's detection,
// which comes after the default and so wins), with the SDK's and the
// process's attributes.
func Resource(ctx context.Context, service string) (*resource.Resource, error) {
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost(),
		resource.WithProcessPID(), resource.WithProcessExecutableName(), resource.WithProcessRuntimeVersion())
	if err != nil {
		return nil, fmt.Errorf("otel resource: %w", err)
	}
	return res, nil
}

// Interceptors are the Temporal client interceptors every payguard client
// and worker carries: the SDK's tracing interceptor, which starts a span for
// StartWorkflow, the workflow run, each activity and each signal, and passes
// the trace along in Temporal's headers. Queries are not traced: reading an
// order's state (`starter status`, `--wait`'s polling) changes nothing, and
// each would be a trace of its own beside the order's.
func Interceptors() []interceptor.ClientInterceptor {
	i, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{TextMapPropagator: propagator, DisableQueryTracing: true})
	if err != nil { // it has no failing option today; without it, no traces
		otel.Handle(err)
		return nil
	}
	return []interceptor.ClientInterceptor{i}
}

// Transport traces an HTTP client's calls as `name METHOD` client spans,
// children of the span in the request's context, and passes the trace on.
// The provider is named (the global one): otelhttp would otherwise take the
// parent span's, and a parent known only by its context (pgsim's callbacks
// continue a create's trace that way) has a no-op provider.
func Transport(name string, rt http.RoundTripper) http.RoundTripper {
	return otelhttp.NewTransport(rt, otelhttp.WithPropagators(propagator), otelhttp.WithTracerProvider(otel.GetTracerProvider()),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return name + " " + r.Method }))
}

// Handler traces an HTTP server's requests as `name METHOD` server spans,
// continuing the trace the caller sent.
func Handler(name string, h http.Handler) http.Handler {
	return otelhttp.NewHandler(h, name, otelhttp.WithPropagators(propagator),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return name + " " + r.Method }))
}

// SDKMetrics is the Temporal SDK's metrics handler: the SDK contrib's
// OpenTelemetry handler on a meter whose reader is the OpenTelemetry
// Prometheus exporter, registered in reg. Counters are monotonic, so they
// are exported as Prometheus counters (`temporal_request_total`); timers are
// histograms in seconds with Prometheus's default buckets
// (`temporal_request_latency_seconds`).
func SDKMetrics(reg prometheus.Registerer) (client.MetricsHandler, error) {
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo(),
		otelprom.WithAggregationSelector(secondsBuckets))
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	meter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp)).Meter("temporal-sdk-go")
	return temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{Meter: meter, UseMonotonicCounters: true,
		// The handler's default panics; a metric that cannot be recorded
		// must never take a worker down.
		OnError: otel.Handle}), nil
}

// secondsBuckets gives the SDK's timers (its only histograms, all in
// seconds) Prometheus's default buckets: OpenTelemetry's defaults are
// meant for milliseconds and would put every latency in the first bucket.
func secondsBuckets(kind sdkmetric.InstrumentKind) sdkmetric.Aggregation {
	if kind == sdkmetric.InstrumentKindHistogram {
		return sdkmetric.AggregationExplicitBucketHistogram{Boundaries: prometheus.DefBuckets}
	}
	return sdkmetric.DefaultAggregationSelector(kind)
}
