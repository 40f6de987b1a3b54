// Package httpapi is payguard's HTTP order API (docs/design.md §12): a
// checkout page, another service or a load tool places, reads and cancels
// orders and sets stock through it. api/main.go only calls Run.
package httpapi

import (
	"context"
	"crypto/subtle"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/loadgen"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/telemetry"
)

// Run is the API's main: it serves until ctx ends, then shuts down.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := ParseFlags(args, getenv, stderr)
	if err != nil {
		return err // -h and --version too: exitcode.Main tells them apart
	}
	return telemetry.Serve(ctx, "payguard-api", cfg.LogLevel, getenv, stdout, func(logger *slog.Logger) (func() error, error) {
		s, err := Start(ctx, cfg, logger)
		if err != nil {
			return nil, err
		}
		return s.Stop, nil
	})
}

// Server is a running API.
type Server struct {
	cfg      Config
	log      *slog.Logger
	store    *store.Store
	temporal client.Client
	// steps hears new orders' first steps (one listening connection).
	steps *store.FirstSteps
	// dataConverter decodes what the client encoded (payguard's codec).
	dataConverter converter.DataConverter
	http          *http.Server
	listener      net.Listener
	Metrics       *Metrics
	purge         context.CancelFunc
	stopOnce      sync.Once
	stopErr       error
}

// HealthPath is the API's liveness endpoint, unauthenticated (compose's
// healthcheck calls it).
const HealthPath = "/healthz"

// PurgeEvery is how often the API deletes Idempotency-Keys past their TTL.
const PurgeEvery = time.Hour

// Start connects to PostgreSQL and Temporal and starts serving.
func Start(ctx context.Context, cfg Config, logger *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts, err := cfg.ClientOptions(logger)
	if err != nil {
		return nil, err
	}
	opts.Interceptors = telemetry.Interceptors()
	s := &Server{cfg: cfg, log: logger, Metrics: NewMetrics(), dataConverter: opts.DataConverter}
	ok := false
	defer func() {
		if !ok {
			s.closeAll()
		}
	}()
	openCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if s.store, err = store.Open(openCtx, cfg.DatabaseURL); err != nil {
		return nil, fmt.Errorf("postgres unreachable at %s: %v", config.MaskURL(cfg.DatabaseURL), loadgen.RootCause(err))
	}
	if err := s.store.Migrate(ctx); err != nil {
		return nil, err
	}
	s.steps = s.store.ListenFirstSteps(func(err error) {
		s.log.Warn("first-step listener down: first answers are read from the orders' rows until it is back", "error", err.Error())
	})
	s.Metrics.listening(s.steps.Listening)
	if s.temporal, err = client.DialContext(openCtx, opts); err != nil {
		return nil, fmt.Errorf("temporal unreachable at %s: %v", opts.HostPort, loadgen.RootCause(err))
	}
	s.listener = cfg.Listener
	if s.listener == nil {
		if s.listener, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
			return nil, fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
		}
	}
	s.http = cfg.HTTPTimeouts.Server(telemetry.Handler("api", s.Metrics.measure(s.routes())))
	purgeCtx, stopPurge := context.WithCancel(context.WithoutCancel(ctx))
	s.purge = stopPurge
	go s.purgeKeys(purgeCtx)
	go func() { _ = s.http.Serve(s.listener) }()
	logger.Info("api ready", "http_addr", s.listener.Addr().String(), "task_queue", cfg.TaskQueue, "token", cfg.Token != "")
	ok = true
	return s, nil
}

func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	api := func(pattern string, h http.HandlerFunc) { mux.Handle(pattern, s.authorized(h)) }
	api("POST /api/v1/orders", s.placeOrder)
	api("GET /api/v1/orders/{orderId}", s.getOrder)
	api("POST /api/v1/orders/{orderId}/cancel", s.cancelOrder)
	api("POST /api/v1/orders/{orderId}/refund", s.refundOrder)
	api("PUT /api/v1/products/{productId}/stock", s.putStock)
	api("GET /api/v1/products/{productId}/stock", s.getStock)
	mux.HandleFunc("GET "+HealthPath, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.Metrics.Registry, promhttp.HandlerOpts{}))
	noRoute := func(w http.ResponseWriter, r *http.Request) {
		if allowed := allowedMethods(mux, r); len(allowed) > 0 {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			writeProblem(w, problem(http.StatusMethodNotAllowed, CodeMethodNotAllowed,
				fmt.Sprintf("%s takes %s, not %s", r.URL.Path, strings.Join(allowed, ", "), r.Method)))
			return
		}
		writeProblem(w, problem(http.StatusNotFound, CodeNotFound, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)))
	}
	// Under /api/ the token comes first, even for a route that is not.
	mux.Handle("/api/", s.authorized(http.HandlerFunc(noRoute)))
	mux.HandleFunc("/", noRoute)
	return mux
}

// allowedMethods are the methods some route takes r's path with.
func allowedMethods(mux *http.ServeMux, r *http.Request) []string {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/" && pattern != "/api/" {
			allowed = append(allowed, m)
		}
	}
	return allowed
}

// authorized requires the bearer token, when one is configured, before
// anything of the request is read.
func (s *Server) authorized(h http.Handler) http.Handler {
	if s.cfg.Token == "" {
		return h
	}
	want := []byte("Bearer " + s.cfg.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="payguard"`)
			detail := "a bearer token is required (Authorization: Bearer <token>)"
			if strings.HasPrefix(string(got), "Bearer ") {
				detail = "the bearer token is wrong"
			}
			writeProblem(w, problem(http.StatusUnauthorized, CodeUnauthorized, detail))
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Server) purgeKeys(ctx context.Context) {
	t := time.NewTicker(PurgeEvery)
	defer t.Stop()
	for {
		if n, err := s.store.PurgeIdempotent(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("purge idempotency keys", "error", err.Error())
		} else if n > 0 {
			s.log.Info("idempotency keys purged", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Addr is the address the API listens on.
func (s *Server) Addr() string { return s.listener.Addr().String() }

// Stop ends serving (in-flight requests finish) and closes connections.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.stopErr = s.http.Shutdown(ctx)
		s.closeAll()
		s.log.Info("api stopped")
	})
	return s.stopErr
}

func (s *Server) closeAll() {
	if s.purge != nil {
		s.purge()
	}
	if s.temporal != nil {
		s.temporal.Close()
	}
	if s.steps != nil {
		s.steps.Close()
	}
	if s.store != nil {
		s.store.Close()
	}
	if s.listener != nil && s.http == nil {
		_ = s.listener.Close()
	}
}
