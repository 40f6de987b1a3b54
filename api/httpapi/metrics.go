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
	MetricFirstAnswers    = "payguard_api_first_answers_total"
	MetricListening       = "payguard_api_first_step_listening"
	MetricFirstStepReads  = "payguard_api_first_step_reads_total"
)

// How a new order's first answer was learned (MetricFirstAnswers' label
// "via").
const (
	ViaNotification = "notification" // the listener heard its first step
	ViaRead         = "read"         // a read of its row, unprompted (the listener down, or not yet heard)
	ViaTimeout      = "timeout"      // still RESERVING at --first-answer-wait
)

// RouteUnmatched labels a request no route took.
const RouteUnmatched = "unmatched"

// Metrics are the API's Prometheus metrics.
type Metrics struct {
	Registry *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// firstAnswers counts new orders' first answers by how they were learned.
	firstAnswers *prometheus.CounterVec
	// firstStepReads counts the reads of waiting orders' rows.
	firstStepReads prometheus.Counter
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
		firstAnswers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricFirstAnswers,
			Help: "New orders' first answers by how their first step was learned: notification, read (the row polled) or timeout.",
		}, []string{"via"}),
		firstStepReads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricFirstStepReads,
			Help: "Reads of a new order's row while its first answer waits: the polling without the listener, and the occasional read beside it.",
		}),
	}
	for _, via := range []string{ViaNotification, ViaRead, ViaTimeout} {
		m.firstAnswers.WithLabelValues(via)
	}
	m.Registry.MustRegister(m.requests, m.duration, m.firstAnswers, m.firstStepReads, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// listening exports whether the first-step listener listens now.
func (m *Metrics) listening(f func() bool) {
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: MetricListening,
		Help: "1 while the API's connection listening for orders' first steps listens (0: first answers are read by polling).",
	}, func() float64 {
		if f() {
			return 1
		}
		return 0
	}))
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
