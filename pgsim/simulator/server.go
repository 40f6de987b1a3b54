// Package simulator is pgsim: an in-memory payment gateway that speaks the
// API of docs/design.md §4 and produces, on demand, every failure payguard must
// survive — refused connections, held answers, injected 5xx, lost,
// delayed and duplicated callbacks. It runs standalone (go run ./pgsim) or
// in-process in tests.
package simulator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/telemetry"
)

// Config configures a Server.
type Config struct {
	Addr      string // gateway API, e.g. 127.0.0.1:8090 (port 0 picks one)
	AdminAddr string // admin API, e.g. 127.0.0.1:8091
	Seed      uint64 // all randomness derives from it
	Secret    []byte // callback signing secret
	// UnsignedCallbacks sends callbacks without X-Timestamp and X-Signature,
	// as the Loopers simulator does.
	UnsignedCallbacks bool
	// CallbackURLPrefix, when set, is what every create's callbackUrl must
	// start with (the simulator's rule is http://localhost:8080).
	CallbackURLPrefix string
	Idempotency       bool          // honour Idempotency-Key
	IdempotencyTTL    time.Duration // how long a key is remembered
	Faults            Faults        // the defaults, restored by /admin/reset
	Logger            *slog.Logger
	// LogLevel is the least level Run's logger logs (--log-level).
	LogLevel slog.Level
	// HTTPTimeouts bound slow clients on both APIs (zero fields take
	// config.DefaultHTTPTimeouts); the gateway's write timeout also covers
	// the longest answer a fault may hold.
	HTTPTimeouts config.HTTPTimeouts
}

// Server is a running simulator.
type Server struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	faults  Faults
	rng     *rand.Rand
	txs     map[string]*transaction
	orders  map[string]*orderStats
	idem    map[string]*idemEntry
	calls   map[string]int // requests received per endpoint
	gateway *http.Server   // nil while down

	gatewayAddr string // fixed at Start, so down/up reopens the same port
	adminAddr   string
	admin       *http.Server

	ctx      context.Context // cancelled by Close: stops held answers and background work
	cancel   context.CancelFunc
	bg       sync.WaitGroup
	serving  sync.WaitGroup
	callback *http.Client
}

type transaction struct {
	Key         string
	OrderID     string
	Amount      int64
	CardType    string
	CardNo      string
	CallbackURL string
	Status      string
	Reason      string
	Refunded    bool
	CreatedAt   time.Time
	trace       trace.SpanContext // the create's, so its callbacks join the order's trace
}

type orderStats struct {
	createRequests int
	createdThen500 int // creates that made a transaction and answered 500
	keys           []string
}

type idemEntry struct {
	bodyHash  [32]byte
	done      bool
	status    int
	body      []byte
	createdAt time.Time
}

// New builds a server; Start opens its listeners.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.HTTPTimeouts = cfg.HTTPTimeouts.OrDefaults()
	if cfg.IdempotencyTTL <= 0 {
		cfg.IdempotencyTTL = 15 * 24 * time.Hour
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg:      cfg,
		log:      cfg.Logger,
		faults:   cfg.Faults,
		rng:      rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		txs:      map[string]*transaction{},
		orders:   map[string]*orderStats{},
		idem:     map[string]*idemEntry{},
		calls:    map[string]int{},
		ctx:      ctx,
		cancel:   cancel,
		callback: &http.Client{Timeout: 5 * time.Second, Transport: telemetry.Transport("pgsim callback", callbackTransport())},
	}
	return s
}

// callbackTransport keeps connections to the callback receivers open for
// the callbacks that go to them at once: a payment service is one host,
// which http.DefaultTransport would keep two idle connections to, opening
// and closing one per callback beyond them under load.
func callbackTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return t
}

// Start opens the admin listener and, unless the default faults say down,
// the gateway listener.
func (s *Server) Start() error {
	if err := s.cfg.Faults.Validate(); err != nil {
		return fmt.Errorf("fault defaults: %w", err)
	}
	gl, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("gateway listener: %w", err)
	}
	al, err := net.Listen("tcp", s.cfg.AdminAddr)
	if err != nil {
		gl.Close()
		return fmt.Errorf("admin listener: %w", err)
	}
	s.gatewayAddr, s.adminAddr = gl.Addr().String(), al.Addr().String()
	s.admin = s.cfg.HTTPTimeouts.Server(s.logged("admin", s.adminHandler()))
	s.serve(s.admin, al)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.faults.Down {
		gl.Close()
		return nil
	}
	s.gateway = s.newGatewayServer()
	s.serve(s.gateway, gl)
	return nil
}

// GatewayURL is the base URL of the gateway API.
func (s *Server) GatewayURL() string { return "http://" + s.gatewayAddr }

// AdminURL is the base URL of the admin API.
func (s *Server) AdminURL() string { return "http://" + s.adminAddr }

// Close stops both listeners, releases held answers and waits for every
// background goroutine (processing, callbacks, their retries) to end.
func (s *Server) Close() error {
	s.cancel()
	s.mu.Lock()
	gw := s.gateway
	s.gateway = nil
	s.mu.Unlock()
	var errs []error
	if gw != nil {
		errs = append(errs, gw.Close())
	}
	if s.admin != nil {
		errs = append(errs, s.admin.Close())
	}
	s.serving.Wait()
	s.bg.Wait()
	s.callback.CloseIdleConnections()
	return errors.Join(errs...)
}

func (s *Server) newGatewayServer() *http.Server {
	t := s.cfg.HTTPTimeouts
	// A held answer is written only when its hold ends: the write timeout
	// runs from the end of the headers, so it must outlast the longest hold
	// Validate allows, with the usual time to write on top.
	t.Write += maxHeldAnswer
	srv := t.Server(telemetry.Handler("pgsim", s.logged("gateway", s.delayed(s.gatewayHandler()))))
	srv.BaseContext = func(net.Listener) context.Context { return s.ctx }
	return srv
}

func (s *Server) serve(srv *http.Server, l net.Listener) {
	s.serving.Add(1)
	go func() {
		defer s.serving.Done()
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("serve", "addr", l.Addr().String(), "error", err)
		}
	}()
}

// setDown closes or reopens the gateway listener. Closing also drops open
// connections, so a client sees refusals at once, not only on new dials.
// Called with s.mu held, which keeps the listener in step with the faults'
// down: closing and opening a listener are immediate system calls, never a
// wait. It logs nothing; the caller does, once the lock is released.
func (s *Server) setDown(down bool) error {
	if down == (s.gateway == nil) {
		return nil
	}
	if down {
		err := s.gateway.Close()
		s.gateway = nil
		return err
	}
	if s.ctx.Err() != nil {
		return errors.New("simulator is shutting down")
	}
	l, err := net.Listen("tcp", s.gatewayAddr)
	if err != nil {
		return fmt.Errorf("reopen gateway listener on %s: %w", s.gatewayAddr, err)
	}
	s.gateway = s.newGatewayServer()
	s.serve(s.gateway, l)
	return nil
}

// logDown says when the gateway listener closed or reopened.
func (s *Server) logDown(was, now bool) {
	switch {
	case now && !was:
		s.log.Info("gateway down", "addr", s.gatewayAddr)
	case was && !now:
		s.log.Info("gateway up", "addr", s.gatewayAddr)
	}
}

// locked runs fn with s.mu held. The deferred unlock releases the lock even
// if fn panics (net/http recovers a handler's panic and serves on), so one
// bad request can never wedge every later request and Close.
func (s *Server) locked(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn()
}

// goBackground runs fn unless the server is closing, tracked for Close.
func (s *Server) goBackground(fn func(ctx context.Context)) {
	if s.ctx.Err() != nil {
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		fn(s.ctx)
	}()
}

// sleep waits d or until ctx ends; it reports whether the full wait elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// between draws uniformly from [lo, hi]. Called with s.mu held, so it must
// not panic whatever the bounds Validate let through: the span is taken in
// uint64, where the difference of any two int64s fits, so a huge max cannot
// overflow into an invalid argument.
func (s *Server) between(lo, hi Duration) time.Duration {
	if hi <= lo {
		return time.Duration(lo)
	}
	span := uint64(hi) - uint64(lo)
	if span == math.MaxUint64 { // the whole int64 range
		return time.Duration(s.rng.Uint64())
	}
	return time.Duration(uint64(lo) + s.rng.Uint64N(span+1))
}

// chance reports true with probability p. Called with s.mu held.
func (s *Server) chance(p float64) bool { return p > 0 && s.rng.Float64() < p }

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// logged writes one structured line per request.
func (s *Server) logged(listener string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		s.log.Info("request", "listener", listener, "method", r.Method, "path", r.URL.Path,
			"query", r.URL.RawQuery, "status", rec.status, "duration_ms", time.Since(start).Milliseconds())
	})
}
