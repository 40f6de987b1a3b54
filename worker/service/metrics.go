package service

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/sony/gobreaker/v2"
	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/internal/buildinfo"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/telemetry"
	"github.com/payguard/payguard/worker/metrics"
)

// Metrics are the worker's Prometheus metrics (docs/design.md §5).
type Metrics struct {
	Registry       *prometheus.Registry
	breakerState   *prometheus.GaugeVec
	breakerCurrent *prometheus.GaugeVec
	orders         *prometheus.CounterVec
	lost           *prometheus.CounterVec
	breakerChanges *prometheus.CounterVec
	gatewayCalls   *prometheus.CounterVec
	lookupLatency  *prometheus.HistogramVec
	refusals       *prometheus.HistogramVec
	callbacks      *prometheus.CounterVec
	refunds        prometheus.Counter
	hintsDropped   prometheus.Counter
	sdk            client.MetricsHandler
}

// NewMetrics registers payguard's metrics and the Go runtime's.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		breakerState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			//lint:ignore SA1019 the deprecated gauge is still exported: its name is a contract
			Name: metrics.BreakerState,
			Help: "Circuit breaker state: 0 closed, 1 half-open, 2 open.",
		}, []string{"breaker"}),
		breakerCurrent: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: metrics.BreakerCurrentState,
			Help: "Circuit breaker state: 1 for the state the breaker is in (closed, half-open, open), 0 for the others.",
		}, []string{"breaker", "state"}),
		orders: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metrics.Orders,
			Help: "Orders at their final status (CONFIRMED, FAILED, CANCELLED, REJECTED), counted once, by the worker that recorded it.",
		}, []string{"status"}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metrics.LostOrders,
			Help: "Lost orders (cancelled without an operator's cancel, or charged then refunded), counted once, by kind.",
		}, []string{"kind"}),
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
		refusals: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: metrics.BreakerRefusalDuration,
			Help: "Lookups and creates a breaker refused, timed from the activity's start to its answer, by endpoint and breaker state.",
			// An open breaker answers from memory, in microseconds; the
			// finer buckets tell that from a statement or a wait.
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .1, .5, 1, 5},
		}, []string{"endpoint", "state"}),
		callbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metrics.Callbacks,
			Help: "Gateway callbacks received, by answer code.",
		}, []string{"code"}),
		refunds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metrics.ChargesRefunded,
			Help: "Charges refunded because the order could not keep them (a SUCCESS that landed late, or a second one).",
		}),
		hintsDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metrics.HintsDropped,
			Help: "Unsigned callbacks (--callback-auth lookup) not passed on as lookup hints: a repeat within the interval, or past the order's bound.",
		}),
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: metrics.BuildInfo,
		Help: "1, labelled with this worker's build: version, revision (the commit, +dirty with uncommitted changes), go.",
	}, []string{"version", "revision", "go"})
	reg.MustRegister(m.breakerState, m.breakerCurrent, m.orders, m.lost, build, m.breakerChanges, m.gatewayCalls, m.lookupLatency, m.refusals, m.callbacks, m.refunds, m.hintsDropped,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	bi := buildinfo.Read()
	rev := bi.Revision
	if bi.Modified {
		rev += "+dirty"
	}
	build.WithLabelValues(bi.Version, rev, bi.Go).Set(1)
	m.setBreakerState(activities.LookupBreakerName, gobreaker.StateClosed)
	for _, st := range status.FinalOrders {
		m.orders.WithLabelValues(string(st))
	}
	for _, kind := range store.LostKinds {
		m.lost.WithLabelValues(kind)
	}
	// Series an alert takes increase() of exist from the start, at 0, so
	// that their first event is an increase (ops/prometheus/alerts.yml).
	m.callbacks.WithLabelValues(strconv.Itoa(http.StatusUnauthorized))
	for _, outcome := range []string{activities.OutcomeOK, activities.OutcomeUnknown, activities.OutcomeUnreachable, activities.OutcomeRejected} {
		m.gatewayCalls.WithLabelValues("create", outcome)
	}
	var err error
	if m.sdk, err = telemetry.SDKMetrics(reg); err != nil {
		panic(err) // only a name clash in a registry built just above: a bug, as MustRegister says
	}
	return m
}

// CountOrdersPastDeadline exports count, called at each scrape, as the
// gauge of open orders past their deadline. A count that fails (database
// unreachable) is exported as NaN, which no threshold matches: /healthz and
// the other alerts speak for an unreachable database.
func (m *Metrics) CountOrdersPastDeadline(count func(context.Context) (int, error)) {
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: metrics.OrdersPastDeadline,
		Help: "Orders not final whose deadline has passed (each should have been compensated by now).",
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		n, err := count(ctx)
		if err != nil {
			return math.NaN()
		}
		return float64(n)
	}))
}

// ChargeRefunded implements activities.Observer.
func (m *Metrics) ChargeRefunded() { m.refunds.Inc() }

// HintDropped counts an unsigned callback not passed on as a lookup hint.
func (m *Metrics) HintDropped() { m.hintsDropped.Inc() }

// GatewayCall implements activities.Observer.
func (m *Metrics) GatewayCall(endpoint, outcome string, took time.Duration) {
	m.gatewayCalls.WithLabelValues(endpoint, outcome).Inc()
	if endpoint == "lookup" || endpoint == "lookup-by-order" {
		m.lookupLatency.WithLabelValues(endpoint, outcome).Observe(took.Seconds())
	}
}

// BreakerRefused implements activities.Observer.
func (m *Metrics) BreakerRefused(endpoint, state string, took time.Duration) {
	m.refusals.WithLabelValues(endpoint, state).Observe(took.Seconds())
}

// BreakerChanged records a breaker state change.
func (m *Metrics) BreakerChanged(name string, from, to gobreaker.State) {
	m.setBreakerState(name, to)
	m.breakerChanges.WithLabelValues(name, from.String(), to.String()).Inc()
}

// breakerStates are the states BreakerCurrentState labels, each breaker
// with all three.
var breakerStates = []gobreaker.State{gobreaker.StateClosed, gobreaker.StateHalfOpen, gobreaker.StateOpen}

// setBreakerState sets both of a breaker's state gauges.
func (m *Metrics) setBreakerState(name string, to gobreaker.State) {
	m.breakerState.WithLabelValues(name).Set(float64(stateValue(to)))
	for _, st := range breakerStates {
		v := 0.0
		if st == to {
			v = 1
		}
		m.breakerCurrent.WithLabelValues(name, st.String()).Set(v)
	}
}

// OrderFinal implements store.Observer.
func (m *Metrics) OrderFinal(_ string, st status.Order) { m.orders.WithLabelValues(string(st)).Inc() }

// OrderLost implements store.Observer.
func (m *Metrics) OrderLost(_, kind string) { m.lost.WithLabelValues(kind).Inc() }

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

// SDKHandler is the Temporal SDK's metrics handler, exported into the
// registry (telemetry.SDKMetrics).
func (m *Metrics) SDKHandler() client.MetricsHandler { return m.sdk }
