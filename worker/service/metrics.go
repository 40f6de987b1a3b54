package service

import (
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/sony/gobreaker/v2"
	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/worker/metrics"
)

// Metrics are the worker's Prometheus metrics (docs/design.md §5).
type Metrics struct {
	Registry       *prometheus.Registry
	breakerState   *prometheus.GaugeVec
	breakerChanges *prometheus.CounterVec
	gatewayCalls   *prometheus.CounterVec
	lookupLatency  *prometheus.HistogramVec
	callbacks      *prometheus.CounterVec
}

// NewMetrics registers payguard's metrics and the Go runtime's.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		breakerState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: metrics.BreakerState,
			Help: "Circuit breaker state: 0 closed, 1 half-open, 2 open.",
		}, []string{"breaker"}),
		breakerChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metrics.BreakerTransitions,
			Help: "Circuit breaker state changes.",
		}, []string{"breaker", "from", "to"}),
		gatewayCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metrics.GatewayCalls,
			Help: "Gateway calls by endpoint and outcome class (ok, unreachable, unknown, rejected, breaker_open).",
		}, []string{"endpoint", "outcome"}),
		lookupLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    metrics.LookupDuration,
			Help:    "Status lookup latency, breaker refusals included.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"endpoint", "outcome"}),
		callbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metrics.Callbacks,
			Help: "Gateway callbacks received, by answer code.",
		}, []string{"code"}),
	}
	reg.MustRegister(m.breakerState, m.breakerChanges, m.gatewayCalls, m.lookupLatency, m.callbacks,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.breakerState.WithLabelValues(activities.LookupBreakerName).Set(0)
	return m
}

// GatewayCall implements activities.Observer.
func (m *Metrics) GatewayCall(endpoint, outcome string, took time.Duration) {
	m.gatewayCalls.WithLabelValues(endpoint, outcome).Inc()
	if endpoint == "lookup" || endpoint == "lookup-by-order" {
		m.lookupLatency.WithLabelValues(endpoint, outcome).Observe(took.Seconds())
	}
}

// BreakerChanged records a breaker state change.
func (m *Metrics) BreakerChanged(name string, from, to gobreaker.State) {
	m.breakerState.WithLabelValues(name).Set(float64(stateValue(to)))
	m.breakerChanges.WithLabelValues(name, from.String(), to.String()).Inc()
}

func stateValue(s gobreaker.State) int {
	switch s {
	case gobreaker.StateHalfOpen:
		return 1
	case gobreaker.StateOpen:
		return 2
	}
	return 0
}

// Callback counts a callback answer.
func (m *Metrics) Callback(code int) {
	m.callbacks.WithLabelValues(strconv.Itoa(code)).Inc()
}

// SDKHandler bridges the Temporal SDK's metrics into the registry.
func (m *Metrics) SDKHandler() client.MetricsHandler {
	return &sdkMetrics{root: &sdkRegistry{reg: m.Registry, vecs: map[string]*sdkVec{}}}
}

// sdkRegistry creates one Prometheus vector per SDK metric name. Prometheus
// wants a fixed label set per name while the SDK's tags may vary between
// calls, so the first use fixes the labels; later uses fill missing labels
// with "" and drop extra ones (their series are summed).
type sdkRegistry struct {
	reg  *prometheus.Registry
	mu   sync.Mutex
	vecs map[string]*sdkVec
}

type sdkVec struct {
	labels    []string
	counter   *prometheus.CounterVec
	gauge     *prometheus.GaugeVec
	histogram *prometheus.HistogramVec
}

func (r *sdkRegistry) vec(kind, name string, tags map[string]string) (*sdkVec, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.vecs[name]
	if !ok {
		v = &sdkVec{}
		for k := range tags {
			v.labels = append(v.labels, k)
		}
		sort.Strings(v.labels)
		var c prometheus.Collector
		switch kind {
		case "counter":
			v.counter = prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: "Temporal SDK counter " + name}, v.labels)
			c = v.counter
		case "gauge":
			v.gauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: "Temporal SDK gauge " + name}, v.labels)
			c = v.gauge
		default:
			v.histogram = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name + "_seconds", Help: "Temporal SDK timer " + name,
				Buckets: prometheus.DefBuckets}, v.labels)
			c = v.histogram
		}
		if err := r.reg.Register(c); err != nil {
			// The same name as another kind: drop it rather than break /metrics.
			v = &sdkVec{}
		}
		r.vecs[name] = v
	}
	values := make([]string, len(v.labels))
	for i, l := range v.labels {
		values[i] = tags[l]
	}
	return v, values
}

type sdkMetrics struct {
	root *sdkRegistry
	tags map[string]string
}

func (h *sdkMetrics) WithTags(tags map[string]string) client.MetricsHandler {
	merged := make(map[string]string, len(h.tags)+len(tags))
	for k, v := range h.tags {
		merged[k] = v
	}
	for k, v := range tags {
		merged[k] = v
	}
	return &sdkMetrics{root: h.root, tags: merged}
}

type counterFunc func(int64)

func (f counterFunc) Inc(d int64) { f(d) }

type gaugeFunc func(float64)

func (f gaugeFunc) Update(v float64) { f(v) }

type timerFunc func(time.Duration)

func (f timerFunc) Record(d time.Duration) { f(d) }

func (h *sdkMetrics) Counter(name string) client.MetricsCounter {
	v, values := h.root.vec("counter", name, h.tags)
	return counterFunc(func(d int64) {
		if v.counter != nil {
			v.counter.WithLabelValues(values...).Add(float64(d))
		}
	})
}

func (h *sdkMetrics) Gauge(name string) client.MetricsGauge {
	v, values := h.root.vec("gauge", name, h.tags)
	return gaugeFunc(func(x float64) {
		if v.gauge != nil {
			v.gauge.WithLabelValues(values...).Set(x)
		}
	})
}

func (h *sdkMetrics) Timer(name string) client.MetricsTimer {
	v, values := h.root.vec("timer", name, h.tags)
	return timerFunc(func(d time.Duration) {
		if v.histogram != nil {
			v.histogram.WithLabelValues(values...).Observe(d.Seconds())
		}
	})
}
