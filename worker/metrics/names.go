// Package metrics names the worker's Prometheus metrics. The worker
// registers them (worker/service) and the load generator, the demo and the
// tests scrape them; the names are public (dashboards read them), so they
// are written once, here, in a package that pulls in nothing.
package metrics

const (
	// BreakerState is a gauge per breaker: 0 closed, 1 half-open, 2 open,
	// as this worker sees it (with --breaker-scope fleet, the fleet's state
	// as last read from PostgreSQL).
	//
	// Deprecated: read BreakerCurrentState, whose state label a dashboard
	// and an alert can name. Kept, as every name here is a contract
	// (docs/design.md §5).
	BreakerState = "payguard_breaker_state"
	// BreakerCurrentState is a gauge per breaker and state (closed,
	// half-open, open, as gobreaker spells them): 1 for the state the
	// breaker is in, 0 for the other two; as this worker sees it, like
	// BreakerState.
	BreakerCurrentState = "payguard_breaker_current_state"
	// BreakerTransitions counts state changes, labelled breaker, from, to
	// (the states as gobreaker spells them).
	BreakerTransitions = "payguard_breaker_transitions_total"
	// GatewayCalls counts gateway calls by endpoint and outcome class.
	GatewayCalls = "payguard_gateway_calls_total"
	// LookupDuration is the status lookup latency histogram; a scraper
	// reads its _sum and _count series.
	LookupDuration = "payguard_lookup_duration_seconds"
	// BreakerRefusalDuration is the latency histogram of the lookups and
	// creates a breaker refused, each timed from its activity's start to
	// its answer, labelled endpoint (lookup, lookup-by-order, create) and
	// state (the breaker's as it refused: open; half-open, its trials
	// taken; closed, the call that may trip it under way).
	BreakerRefusalDuration = "payguard_breaker_refusal_duration_seconds"
	// BreakerStoreDuration is the latency histogram of the fleet breaker's
	// statements against PostgreSQL, labelled breaker and op (read, lock,
	// unlock, get, set).
	BreakerStoreDuration = "payguard_breaker_store_duration_seconds"
	// BreakerStoreErrors counts those statements that failed, labelled
	// breaker and op.
	BreakerStoreErrors = "payguard_breaker_store_errors_total"
	// BreakerFallback is a gauge per breaker: 1 while the shared store
	// fails and this worker decides with its own process breaker.
	BreakerFallback = "payguard_breaker_fallback"
	// Callbacks counts gateway callbacks by answer code.
	Callbacks = "payguard_callbacks_total"
	// HintsDropped counts unsigned callbacks the endpoint did not pass on as
	// lookup hints (store.PassHint's bound).
	HintsDropped = "payguard_lookup_hints_dropped_total"
	// ChargesRefunded counts charges refunded because their order could not
	// keep them: a SUCCESS that landed after the order ended, or a second
	// one. Any is worth a look (ops/prometheus alerts on it).
	ChargesRefunded = "payguard_charges_refunded_total"
	// OrdersPastDeadline is a gauge, read from PostgreSQL at each scrape:
	// orders not final whose deadline has passed.
	OrdersPastDeadline = "payguard_orders_past_deadline"
	// Orders counts orders at their final status, labelled status
	// (CONFIRMED, FAILED, CANCELLED, REJECTED): once per order, by the
	// worker whose step recorded the end (store.Observer).
	Orders = "payguard_orders_total"
	// LostOrders counts lost orders, labelled kind (store.LostKinds: a sale
	// the customer wanted and did not get), once per order, by the one
	// definition the demo's and chaos's reports use (store.Outcomes).
	LostOrders = "payguard_lost_orders_total"
	// BuildInfo is 1, labelled version, revision (the commit, +dirty for a
	// build with uncommitted changes) and go: which build answers
	// (internal/buildinfo).
	BuildInfo = "payguard_build_info"
	// WorkerBuild is 1, labelled deployment and build_id: the Worker
	// Deployment version this worker polls as (docs/rollout.md).
	WorkerBuild = "payguard_worker_build"
	// PinnedRunsOpen is a gauge per build of the worker's deployment,
	// labelled deployment and build_id: the open runs pinned to it, which
	// wait for a worker of that build. Every worker exports the fleet's
	// counts; a count above 0 for a build no worker exports WorkerBuild
	// for is a build stopped too soon.
	PinnedRunsOpen = "payguard_pinned_runs_open"
)

// The reconciliation sweep's metrics (docs/design.md §10).
const (
	// ReconcileFindings counts the sweep's findings, labelled finding and action.
	ReconcileFindings = "payguard_reconcile_findings_total"
	// ReconcileLastSweep is when the last sweep that ran on the worker ended, in Unix seconds.
	ReconcileLastSweep = "payguard_reconcile_last_sweep_timestamp_seconds"
	// ReconcileDuration is how long that sweep took.
	ReconcileDuration = "payguard_reconcile_last_sweep_duration_seconds"
)
