package service

import (
	"flag"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/breaker"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/worker/metrics"
)

// newBreakers builds the lookup and create breakers in the configured
// scope. A fleet breaker's lease outlasts the longest call made under it (a
// create or lookup, the slowest answer the gateway client waits for) and
// the statements around it, so that no second half-open trial starts while
// the first may still be waiting for its answer.
func newBreakers(cfg Config, st *store.Store, m *Metrics, logger *slog.Logger) (lookups, creates *breaker.Breaker) {
	obs := newBreakerMetrics(m)
	var shared *breaker.Shared
	if cfg.breakerScope() == breaker.ScopeFleet {
		shared = st.SharedBreakers(store.BreakerLease(gateway.MaxCallTime(cfg.ConnectTimeout, cfg.ReadTimeout)))
	}
	lookups = breaker.New(activities.LookupRules(cfg.Breaker), shared, obs, logger)
	creates = breaker.New(activities.CreateRules(cfg.requestBreaker()), shared, obs, logger)
	return lookups, creates
}

// requestBreaker is RequestBreaker with its default.
func (c Config) requestBreaker() activities.BreakerSettings {
	if c.RequestBreaker == (activities.BreakerSettings{}) {
		return activities.DefaultRequestBreakerSettings()
	}
	return c.RequestBreaker
}

// breakerFlags registers one breaker's flags, --PREFIX-window and so on,
// over b's current values.
func breakerFlags(fs *flag.FlagSet, prefix, what string, b *activities.BreakerSettings) {
	fs.DurationVar(&b.Window, prefix+"-window", b.Window, what+": rolling window calls are counted in")
	fs.Var((*count)(&b.MinCalls), prefix+"-min-calls", what+": least calls in the window before it may trip on the failure rate")
	fs.Float64Var(&b.FailureRate, prefix+"-failure-rate", b.FailureRate, what+": failure share that trips it")
	fs.Var((*count)(&b.ConsecutiveFailures), prefix+"-consecutive-failures",
		what+": failures in a row that trip it whatever the window holds (0: off)")
	fs.DurationVar(&b.OpenFor, prefix+"-open", b.OpenFor, what+": time open before trial calls")
	fs.Var((*count)(&b.HalfOpenCalls), prefix+"-half-open-calls", what+": trial calls in half-open, all of which must succeed to close it")
}

// count is a breaker's count flag: a uint32 as gobreaker counts, so that a
// value too large is refused at parsing instead of wrapping round.
type count uint32

func (c *count) String() string { return strconv.FormatUint(uint64(*c), 10) }

func (c *count) Set(s string) error {
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return fmt.Errorf("want a whole number from 0 to %d", uint32(math.MaxUint32))
	}
	*c = count(v)
	return nil
}

// validateBreaker names the first bad setting of the breaker under prefix.
func validateBreaker(prefix string, b activities.BreakerSettings) error {
	switch {
	case b.Window <= 0 || b.OpenFor <= 0:
		return fmt.Errorf("configuration: --%[1]s-window and --%[1]s-open must be positive", prefix)
	case b.FailureRate <= 0 || b.FailureRate > 1:
		return fmt.Errorf("configuration: --%s-failure-rate must be within (0, 1], got %v", prefix, b.FailureRate)
	case b.MinCalls < 1 || b.HalfOpenCalls < 1:
		return fmt.Errorf("configuration: --%[1]s-min-calls and --%[1]s-half-open-calls must be at least 1", prefix)
	case b.ConsecutiveFailures == 1:
		// One more failure would always reach it: every call of the fleet
		// breaker would run one at a time under the shared lease.
		return fmt.Errorf("configuration: --%s-consecutive-failures must be 0 (off) or at least 2, got 1: "+
			"at 1 any single failure trips it, and every call of the fleet's breaker would wait its turn for the shared lease", prefix)
	}
	return nil
}

// breakerMetrics turn a breaker's observations into the worker's metrics.
type breakerMetrics struct {
	m        *Metrics
	took     *prometheus.HistogramVec
	errs     *prometheus.CounterVec
	fallback *prometheus.GaugeVec
}

func newBreakerMetrics(m *Metrics) *breakerMetrics {
	b := &breakerMetrics{m: m,
		took: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    metrics.BreakerStoreDuration,
			Help:    "Latency of the fleet breaker's statements against PostgreSQL, by breaker and op.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"breaker", "op"}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metrics.BreakerStoreErrors,
			Help: "Failed statements of the fleet breaker against PostgreSQL, by breaker and op.",
		}, []string{"breaker", "op"}),
		fallback: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: metrics.BreakerFallback,
			Help: "1 while the shared breaker store fails and this worker decides with its own breaker.",
		}, []string{"breaker"}),
	}
	m.Registry.MustRegister(b.took, b.errs, b.fallback)
	for _, name := range []string{activities.LookupBreakerName, activities.CreateBreakerName} {
		m.setBreakerState(name, gobreaker.StateClosed)
		b.fallback.WithLabelValues(name).Set(0)
	}
	return b
}

func (b *breakerMetrics) BreakerState(name string, from, to gobreaker.State) {
	b.m.BreakerChanged(name, from, to)
}

func (b *breakerMetrics) StoreCall(name, op string, took time.Duration, err error) {
	b.took.WithLabelValues(name, op).Observe(took.Seconds())
	if err != nil {
		b.errs.WithLabelValues(name, op).Inc()
	}
}

func (b *breakerMetrics) Fallback(name string, on bool) {
	v := 0.0
	if on {
		v = 1
	}
	b.fallback.WithLabelValues(name).Set(v)
}
