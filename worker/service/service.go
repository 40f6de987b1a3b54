// Package service is the payguard worker process: it connects to Temporal,
// PostgreSQL and the gateway, runs PaymentWorkflow and its activities on the
// payments task queue, and serves the callback, health and metrics
// endpoints (docs/design.md §5). worker/main.go only calls Run.
package service

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/breaker"
	"github.com/payguard/payguard/codec"
	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/telemetry"
)

// Run is the worker's main: it runs until ctx ends (SIGINT/SIGTERM), then
// shuts down gracefully. It logs to stdout; the usage goes to stderr.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := ParseFlags(args, getenv, stderr)
	if err != nil {
		return err // -h and --version too: exitcode.Main tells them apart
	}
	return telemetry.Serve(ctx, "payguard-worker", cfg.LogLevel, getenv, stdout, func(logger *slog.Logger) (func() error, error) {
		w, err := Start(ctx, cfg, logger)
		if err != nil {
			return nil, err
		}
		return w.Stop, nil
	})
}

// Worker is a running worker process.
type Worker struct {
	cfg      Config
	log      *slog.Logger
	store    *store.Store
	gateway  *gateway.Client
	temporal client.Client
	codec    *codec.Codec
	worker   worker.Worker
	http     *http.Server
	listener net.Listener
	served   chan error
	// stopBuilds ends the reader of the deployment's builds for /metrics;
	// buildsDone is closed once it has.
	stopBuilds context.CancelFunc
	buildsDone chan struct{}
	stopOnce   sync.Once
	stopErr    error
	Metrics    *Metrics
	// Breaker is the lookup breaker and Creates the request breaker,
	// shared by the fleet or this process's own (--breaker-scope).
	Breaker *breaker.Breaker
	Creates *breaker.Breaker
	// Activities are the worker's activities, sharing its breaker.
	Activities *activities.Activities
}

// Start connects everything and starts serving. It waits for Temporal to
// come up (logging while it waits) until ctx ends.
func Start(ctx context.Context, cfg Config, logger *slog.Logger) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Each line names the order's trace: the workflow's and the activities'
	// through the SDK's logger, the HTTP handlers' through their context.
	logger = slog.New(telemetry.LogHandler(logger.Handler()))
	logger.Info("worker starting", cfg.LogAttrs()...)
	if cfg.GatewaySecret == gateway.DevSecret {
		logger.Warn("GATEWAY_SECRET is not set: using the public development secret, taken only because the callback endpoint is on loopback")
	}
	w := &Worker{cfg: cfg, log: logger, Metrics: NewMetrics(), served: make(chan error, 1)}
	// The client options come first: a missing codec key or a bad client
	// config profile is refused before any connection is made.
	clientOpts, err := cfg.ClientOptions(logger)
	if err != nil {
		return nil, err
	}
	clientOpts.MetricsHandler = w.Metrics.SDKHandler()
	clientOpts.Interceptors = telemetry.Interceptors()
	w.codec, err = cfg.Codec()
	if err != nil {
		return nil, err
	}
	logger.Info("temporal client", "address", clientOpts.HostPort, "namespace", clientOpts.Namespace,
		"tls", clientOpts.ConnectionOptions.TLS != nil, "api_key", clientOpts.Credentials != nil, "codec_keys", w.codec.KeyIDs())
	if cfg.CodecToken == "" && !config.LoopbackOnly(cfg.listenAddr()) {
		logger.Warn("the codec server decrypts payloads for anyone who reaches it: set PAYGUARD_CODEC_TOKEN (--codec-token)", "http_addr", cfg.listenAddr())
	}
	ok := false
	defer func() {
		if !ok {
			w.closeAll()
		}
	}()

	st, err := openStore(ctx, cfg.databaseURL(), logger)
	if err != nil {
		return nil, err
	}
	w.store = st
	st.Observe(w.Metrics)
	if err := st.Migrate(ctx); err != nil {
		return nil, err
	}
	w.Metrics.CountOrdersPastDeadline(st.OpenPastDeadline)
	w.gateway, err = gateway.New(gateway.Config{BaseURL: cfg.GatewayURL, ConnectTimeout: cfg.ConnectTimeout, ReadTimeout: cfg.ReadTimeout})
	if err != nil {
		return nil, err
	}
	w.temporal, err = dialTemporal(ctx, clientOpts, logger)
	if err != nil {
		return nil, err
	}
	builds := newBuildCollector(w.temporal, cfg, logger)
	w.Metrics.Registry.MustRegister(builds)
	w.Breaker, w.Creates = newBreakers(cfg, st, w.Metrics, logger)
	acts := activities.New(st, w.gateway, w.Breaker, activities.Config{CallbackURL: cfg.CallbackURL, IdempotencyKeys: cfg.IdempotencyKeys, CallbackSecret: []byte(cfg.GatewaySecret),
		Creates: w.Creates, CancelRequested: activities.CancelRequestedBy(w.temporal)}, w.Metrics)
	w.Activities = acts
	w.worker = cfg.newWorker(w.temporal)
	cfg.registerWorkflows(w.worker)
	w.worker.RegisterActivity(acts)
	w.worker.RegisterActivity(activities.NewSweeper(st, acts, workflowsRunning{w.temporal}, cfg.reconcileRate(),
		newReconcileMetrics(w.Metrics.Registry)))
	if err := EnsureSchedule(ctx, w.temporal, cfg); err != nil && cfg.ReconcileInterval > 0 {
		return nil, fmt.Errorf("reconciliation schedule: %w", err)
	} else if err != nil {
		logger.Warn("reconciliation schedule not paused", "error", err.Error())
	}

	w.listener = cfg.Listener
	if w.listener == nil {
		if w.listener, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
			return nil, fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/callbacks/gateway", telemetry.Handler("callback", &callbackHandler{store: st, temporal: w.temporal, taskQueue: cfg.TaskQueue,
		secret: []byte(cfg.GatewaySecret), lookupMode: cfg.callbackAuth() == CallbackAuthLookup, metrics: w.Metrics, log: logger, now: time.Now}))
	mux.HandleFunc("GET /healthz", w.healthz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(w.Metrics.Registry, promhttp.HandlerOpts{}))
	w.codec.Register(mux, codec.ServerOptions{Origins: cfg.CodecOrigins, Token: cfg.CodecToken})
	if cfg.Pprof {
		servePprof(mux)
	}
	w.http = cfg.HTTPTimeouts.Server(mux)

	if err := w.worker.Start(); err != nil {
		return nil, fmt.Errorf("start worker: %w", err)
	}
	if err := cfg.applySetCurrent(ctx, w.temporal, logger); err != nil {
		w.worker.Stop()
		return nil, err
	}
	go func() { w.served <- w.http.Serve(w.listener) }()
	var buildsCtx context.Context
	buildsCtx, w.stopBuilds = context.WithCancel(context.Background())
	w.buildsDone = make(chan struct{})
	go func() { defer close(w.buildsDone); builds.run(buildsCtx) }()
	logger.Info("worker ready", "http_addr", w.listener.Addr().String(), "task_queue", cfg.TaskQueue)
	ok = true
	return w, nil
}

// Addr is the address the HTTP endpoints listen on.
func (w *Worker) Addr() string { return w.listener.Addr().String() }

// Stop shuts down in order: no new HTTP requests, in-flight activities
// finish, the worker stops, connections close. A second call waits for
// the first and returns its result (a test stops an old build's worker
// before its stack's cleanup does).
func (w *Worker) Stop() error {
	w.stopOnce.Do(func() {
		w.log.Info("worker stopping")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		w.stopErr = w.http.Shutdown(ctx)
		w.worker.Stop()
		w.closeAll()
		w.log.Info("worker stopped")
	})
	return w.stopErr
}

func (w *Worker) closeAll() {
	if w.stopBuilds != nil {
		w.stopBuilds()
		<-w.buildsDone
	}
	for _, b := range []*breaker.Breaker{w.Breaker, w.Creates} {
		if b != nil {
			b.Close()
		}
	}
	if w.temporal != nil {
		w.temporal.Close()
	}
	if w.gateway != nil {
		w.gateway.Close()
	}
	if w.store != nil {
		w.store.Close()
	}
}

func (w *Worker) healthz(rw http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	problems := map[string]string{}
	if err := w.store.Pool().Ping(ctx); err != nil {
		problems["postgres"] = err.Error()
	}
	if _, err := w.temporal.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		problems["temporal"] = err.Error()
	}
	body := map[string]any{"status": "ok", "breaker": w.Breaker.State().String()}
	code := http.StatusOK
	if len(problems) > 0 {
		body["status"], body["problems"] = "degraded", problems
		code = http.StatusServiceUnavailable
	}
	writeJSON(rw, code, body)
}

// openStore connects to Postgres, retrying while it is not up yet.
func openStore(ctx context.Context, url string, logger *slog.Logger) (*store.Store, error) {
	for {
		st, err := store.Open(ctx, url)
		if err == nil {
			return st, nil
		}
		logger.Warn("waiting for PostgreSQL", "error", err.Error())
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("postgres not reachable: %w", err)
		case <-time.After(2 * time.Second):
		}
	}
}

// dialTemporal connects to Temporal, retrying with a clear message while the
// server is not up yet.
func dialTemporal(ctx context.Context, opts client.Options, logger *slog.Logger) (client.Client, error) {
	for {
		dialCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := client.DialContext(dialCtx, opts)
		cancel()
		if err == nil {
			return c, nil
		}
		logger.Warn("waiting for Temporal", "address", opts.HostPort, "error", err.Error())
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("temporal not reachable at %s: %w", opts.HostPort, err)
		case <-time.After(2 * time.Second):
		}
	}
}
