package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// The service name a collector receives: the program's unless the standard
// variables name another, through a real OTLP/HTTP export (autoexport's
// default exporter) to a receiver in the test.
func TestOTELServiceNameWinsOverTheProgramsName(t *testing.T) {
	got := make(chan *collectortrace.ExportTraceServiceRequest, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		req := &collectortrace.ExportTraceServiceRequest{}
		if err == nil && r.URL.Path == "/v1/traces" {
			err = proto.Unmarshal(body, req)
		}
		if err != nil || r.URL.Path != "/v1/traces" {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		got <- req
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(nil)
	}))
	defer srv.Close()

	for _, tc := range []struct{ name, serviceEnv, attrsEnv, want string }{
		{"the program's by default", "", "", "payguard-worker"},
		{"OTEL_SERVICE_NAME", "checkout-worker", "", "checkout-worker"},
		{"OTEL_RESOURCE_ATTRIBUTES", "", "service.name=from-attributes,deployment.environment=test", "from-attributes"},
		{"OTEL_SERVICE_NAME over OTEL_RESOURCE_ATTRIBUTES", "checkout-worker", "service.name=from-attributes", "checkout-worker"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EndpointEnv, srv.URL)
			t.Setenv("OTEL_SERVICE_NAME", tc.serviceEnv)
			t.Setenv("OTEL_RESOURCE_ATTRIBUTES", tc.attrsEnv)
			ctx := context.Background()
			tp, err := newProvider(ctx, "payguard-worker", os.Getenv)
			if err != nil || tp == nil {
				t.Fatalf("provider %v, %v", tp, err)
			}
			_, span := tp.Tracer("test").Start(ctx, "one span")
			span.End()
			if err := tp.Shutdown(ctx); err != nil { // flushes the batch
				t.Fatal(err)
			}
			select {
			case req := <-got:
				if n := serviceName(req); n != tc.want {
					t.Errorf("service.name %q, want %q", n, tc.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no export received")
			}
		})
	}
}

func serviceName(req *collectortrace.ExportTraceServiceRequest) string {
	for _, rs := range req.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				return kv.GetValue().GetStringValue()
			}
		}
	}
	return ""
}

// Nothing is exported, and no provider built, unless a variable asks for
// it; OTEL_TRACES_EXPORTER=none turns it off even with an endpoint.
func TestNoProviderUnlessAsked(t *testing.T) {
	ctx := context.Background()
	if tp, err := newProvider(ctx, "x", func(string) string { return "" }); err != nil || tp != nil {
		t.Errorf("no variable: provider %v, %v; want none", tp, err)
	}
	t.Setenv(EndpointEnv, "http://127.0.0.1:1")
	t.Setenv(TracesExporterEnv, "none")
	if tp, err := newProvider(ctx, "x", os.Getenv); err != nil || tp != nil {
		t.Errorf("%s=none: provider %v, %v; want none", TracesExporterEnv, tp, err)
	}
	if _, err := newProvider(ctx, "x", func(k string) string {
		return map[string]string{EndpointEnv: "collector:4318"}[k]
	}); err == nil {
		t.Error("an endpoint with no scheme is refused")
	}
}
