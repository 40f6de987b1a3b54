package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metric names (docs/design.md §12).
const (
	MetricRequests        = "payguard_api_requests_total"
	MetricRequestDuration = "payguard_api_request_duration_seconds"
)

// RouteUnmatched labels a request no route took.
const RouteUnmatched = "unmatched"

// Metrics are the API's Prometheus metrics.
type Metrics struct {
	Registry *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics registers the API's metrics and the Go runtime's.
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRequests,
			Help: "API requests by route (the route's pattern) and answer code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricRequestDuration,
			Help:    "API request latency by route, from the end of the headers to the answer.",
			Buckets: []float64{.001, .0025, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"route"}),
	}
	m.Registry.MustRegister(m.requests, m.duration, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// codeWriter remembers the status code written.
type codeWriter struct {
	http.ResponseWriter
	code int
}

func (c *codeWriter) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *codeWriter) Write(b []byte) (int, error) {
	if c.code == 0 {
		c.code = http.StatusOK
	}
	return c.ResponseWriter.Write(b)
}

func (c *codeWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// measure counts and times every request of mux by the pattern that took
// it, which the mux sets on the request it is handed.
func (m *Metrics) measure(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		cw := &codeWriter{ResponseWriter: w}
		mux.ServeHTTP(cw, r)
		route := r.Pattern
		if route == "" || route == "/" || route == "/api/" {
			route = RouteUnmatched
		}
		m.requests.WithLabelValues(route, strconv.Itoa(cw.code)).Inc()
		m.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}
