package service

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/breaker"
	"github.com/payguard/payguard/codec"
	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/exitcode"
	"github.com/payguard/payguard/workflows"
)

// Config is the worker's whole configuration (docs/design.md §6).
type Config struct {
	config.Common
	HTTPAddr        string
	ConnectTimeout  time.Duration
	ReadTimeout     time.Duration
	RequestAttempts int
	IdempotencyKeys bool
	UnknownGrace    time.Duration
	// AnsweredGrace: zero (a Config built in code) takes the default.
	AnsweredGrace time.Duration
	PollInitial   time.Duration
	PollMax       time.Duration
	Breaker       activities.BreakerSettings
	// RequestBreaker is the create breaker's; the zero value (a Config
	// built in code) takes activities.DefaultRequestBreakerSettings.
	RequestBreaker activities.BreakerSettings
	// BreakerScope is breaker.ScopeFleet (the breakers' state shared by
	// every worker through PostgreSQL) or breaker.ScopeProcess; "" is fleet.
	BreakerScope string
	// CallbackAuth is how a callback is trusted: CallbackAuthSigned (only a
	// valid signature) or CallbackAuthLookup (an unsigned one is a hint that
	// makes the workflow look the transaction up; see callback.go).
	CallbackAuth string
	// ReconcileInterval is how often the sweep's schedule runs it; 0 (the
	// zero Config's, as in tests) creates none and pauses an existing one.
	ReconcileInterval time.Duration
	// ReconcileWindow: the sweep checks final orders that changed within it.
	ReconcileWindow time.Duration
	// ReconcileRate bounds the sweep's gateway lookups a second; 0 takes
	// workflows.DefaultReconcileRate.
	ReconcileRate float64
	// CodecOrigins may call the codec server from a browser (the Temporal
	// UI's origin); CodecToken, when set, is the bearer token it requires.
	CodecOrigins []string
	CodecToken   string
	// Pprof serves Go's profiler under /debug/pprof/ on HTTPAddr.
	Pprof bool
	// Capacity knobs (tuning.go): 0 keeps the library's default.
	DBMaxConns      int
	StickyCacheSize int
	TaskPollers     int
	// LogLevel is the least level logged (--log-level).
	LogLevel slog.Level
	// ShutdownTimeout bounds the wait for in-flight activities on stop.
	ShutdownTimeout time.Duration
	// Listener, when set, is used instead of listening on HTTPAddr (tests).
	Listener net.Listener
	// HTTPTimeouts bound slow clients of the HTTP endpoints; zero fields
	// take config.DefaultHTTPTimeouts (tests shorten them).
	HTTPTimeouts config.HTTPTimeouts
	// DeploymentName and BuildID are the Worker Deployment version the
	// worker polls as, SetCurrent what it does about the deployment's
	// current version (versioning.go); "" takes each one's default.
	DeploymentName string
	BuildID        string
	SetCurrent     string
	// RegisterWorkflows, when set, registers the workflows in place of
	// workflows.New(tuning).Register: a test's second build with a
	// deliberately different workflow.
	RegisterWorkflows func(worker.WorkflowRegistry, workflows.Tuning)
}

// --callback-auth values.
const (
	CallbackAuthSigned = "signed"
	CallbackAuthLookup = "lookup"
)

// ParseFlags reads the worker's flags, each from its variable where the
// command line leaves it (config.Parse); usage is where -h and a mistake
// print the usage. A mistake is a usage error (exit 2).
func ParseFlags(args []string, getenv func(string) string, usage io.Writer) (Config, error) {
	fs, finish := newFlagSet(getenv)
	fs.SetOutput(usage)
	if err := config.Parse(fs, args, getenv); err != nil {
		return Config{}, err
	}
	c, err := finish()
	return c, exitcode.UsageError(err)
}

// FlagSet is the worker's flag set as ParseFlags reads it, unparsed
// (docs/configuration.md is generated from it).
func FlagSet(getenv func(string) string) *flag.FlagSet {
	fs, _ := newFlagSet(getenv)
	return fs
}

// newFlagSet registers the worker's flags over a fresh Config; finish
// completes and validates it once they are parsed.
func newFlagSet(getenv func(string) string) (fs *flag.FlagSet, finish func() (Config, error)) {
	fs = flag.NewFlagSet("worker", flag.ContinueOnError)
	var c Config
	c.Common.Register(fs, getenv)
	c.Breaker, c.RequestBreaker = activities.DefaultBreakerSettings(), activities.DefaultRequestBreakerSettings()
	fs.StringVar(&c.HTTPAddr, "http-addr", config.DefaultWorkerAddr, "listen address of the callback, health and metrics endpoints")
	fs.DurationVar(&c.ConnectTimeout, "connect-timeout", gateway.DefaultConnectTimeout, "gateway dial timeout: a failure within it never reached the gateway")
	fs.DurationVar(&c.ReadTimeout, "read-timeout", gateway.DefaultReadTimeout, "gateway answer timeout: a failure within it has an unknown outcome")
	fs.IntVar(&c.RequestAttempts, "request-attempts", workflows.DefaultRequestAttempts, "creates per order at most (retries of unreachable and re-sends); 0: as many as the order's deadline allows")
	fs.BoolVar(&c.IdempotencyKeys, "idempotency-keys", false, "send an Idempotency-Key derived from the order id (only for gateways that honour it)")
	fs.DurationVar(&c.UnknownGrace, "unknown-grace", workflows.DefaultUnknownGrace, "after a create that timed out, how long no transaction means the gateway never took it")
	fs.DurationVar(&c.AnsweredGrace, "answered-grace", workflows.DefaultAnsweredGrace, "after a create answered 5xx, the wait before the lookup that may justify a re-send (twice that after a re-send)")
	fs.DurationVar(&c.PollInitial, "poll-initial", workflows.DefaultPollInitial, "first status poll after the create")
	fs.DurationVar(&c.PollMax, "poll-max", workflows.DefaultPollMax, "longest interval between status polls")
	breakerFlags(fs, "breaker", "lookup breaker", &c.Breaker)
	breakerFlags(fs, "request-breaker", "request (create) breaker", &c.RequestBreaker)
	fs.StringVar(&c.BreakerScope, "breaker-scope", breaker.ScopeFleet,
		"who shares the lookup and create breakers: fleet (every worker on this database, state in PostgreSQL) or process (this worker alone)")
	fs.StringVar(&c.CallbackAuth, "callback-auth", CallbackAuthSigned,
		"how callbacks are trusted: signed (a valid X-Signature, else 401) or lookup (a validly signed one as signed; an unsigned one only makes the order's workflow look the transaction up now)")
	fs.DurationVar(&c.ReconcileInterval, "reconcile-interval", workflows.DefaultReconcileInterval,
		"how often the reconciliation sweep runs (a Temporal Schedule the worker creates or updates); 0 creates none and pauses an existing one")
	fs.DurationVar(&c.ReconcileWindow, "reconcile-window", workflows.DefaultReconcileWindow, "the sweep checks orders that ended within this window (open ones always)")
	fs.Float64Var(&c.ReconcileRate, "reconcile-rate", workflows.DefaultReconcileRate, "the sweep's gateway lookups a second, at most")
	origins := fs.String("codec-cors-origins", config.Env(getenv, "PAYGUARD_CODEC_CORS_ORIGINS", config.DefaultCodecOrigins),
		"comma-separated browser origins the codec server answers (the Temporal UI's; env PAYGUARD_CODEC_CORS_ORIGINS)")
	fs.StringVar(&c.CodecToken, "codec-token", getenv("PAYGUARD_CODEC_TOKEN"), "bearer token the codec server requires (env PAYGUARD_CODEC_TOKEN; unset, none: loopback only)")
	registerTuning(fs, &c)
	registerVersioning(fs, getenv, &c)
	fs.BoolVar(&c.Pprof, "pprof", false, "serve Go's profiler under /debug/pprof/ on --http-addr (make bench turns it on)")
	config.RegisterLogLevel(fs, &c.LogLevel)
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "how long to wait for in-flight activities on shutdown")
	return fs, func() (Config, error) {
		c.CodecOrigins = config.SplitList(*origins)
		return c, c.Validate()
	}
}

// answeredGrace is AnsweredGrace with its default.
func (c Config) answeredGrace() time.Duration {
	if c.AnsweredGrace == 0 {
		return workflows.DefaultAnsweredGrace
	}
	return c.AnsweredGrace
}

// Validate checks every setting, naming each problem.
func (c Config) Validate() error {
	if err := c.Common.Validate(); err != nil {
		return err
	}
	if err := c.validateVersioning(); err != nil {
		return err
	}
	if err := validateBreaker("breaker", c.Breaker); err != nil {
		return err
	}
	if err := validateBreaker("request-breaker", c.requestBreaker()); err != nil {
		return err
	}
	switch {
	case c.ConnectTimeout <= 0 || c.ReadTimeout <= 0:
		return fmt.Errorf("configuration: --connect-timeout and --read-timeout must be positive")
	case c.RequestAttempts < 0:
		return fmt.Errorf("configuration: --request-attempts must not be negative (0: as many as the deadline allows), got %d", c.RequestAttempts)
	case c.UnknownGrace <= 0 || c.PollInitial <= 0 || c.PollMax < c.PollInitial || c.AnsweredGrace < 0:
		return fmt.Errorf("configuration: --unknown-grace and --poll-initial must be positive, --answered-grace not negative and --poll-max at least --poll-initial")
	case c.UnknownGrace <= activities.SendWindow+c.ConnectTimeout || c.UnknownGrace <= c.ReadTimeout:
		// A frozen sender's create leaves up to SendWindow plus its dial
		// after its record; a timed-out create was on the wire a whole
		// read timeout. A lookup sooner than either may miss it and grant
		// a re-send beside it: a second charge.
		return fmt.Errorf("configuration: --unknown-grace (%s) must exceed the send window plus --connect-timeout (%s) and --read-timeout (%s): a create may still be in flight",
			c.UnknownGrace, activities.SendWindow+c.ConnectTimeout, c.ReadTimeout)
	case c.ReconcileInterval < 0 || c.ReconcileWindow < 0 || c.ReconcileRate < 0:
		return fmt.Errorf("configuration: --reconcile-interval, --reconcile-window and --reconcile-rate must not be negative")
	case c.ReconcileRate != 0 && c.ReconcileRate < workflows.MinReconcileRate:
		return fmt.Errorf("configuration: --reconcile-rate must be at least %v lookups a second (a slower sweep outlasts its batches' timeouts), got %v",
			workflows.MinReconcileRate, c.ReconcileRate)
	case c.ReconcileInterval > 0 && c.ReconcileInterval < time.Second:
		return fmt.Errorf("configuration: --reconcile-interval must be 0 (off) or at least 1s, got %s", c.ReconcileInterval)
	case c.ReconcileInterval > 0 && c.reconcileWindow() < 2*c.ReconcileInterval:
		// A sweep checks final orders that changed within its window; an
		// order ended just after one sweep read its page (or during a
		// sweep the next one skipped, overlap policy skip) is checked by
		// a later sweep only if the window reaches back that far.
		return fmt.Errorf("configuration: --reconcile-window (%s) must be at least twice --reconcile-interval (%s): orders that end between sweeps would never be checked",
			c.reconcileWindow(), c.ReconcileInterval)
	case c.BreakerScope != "" && c.BreakerScope != breaker.ScopeFleet && c.BreakerScope != breaker.ScopeProcess:
		return fmt.Errorf("configuration: --breaker-scope must be %s or %s, got %q", breaker.ScopeFleet, breaker.ScopeProcess, c.BreakerScope)
	case c.DBMaxConns < 0 || c.StickyCacheSize < 0 || c.TaskPollers < 0:
		return fmt.Errorf("configuration: --db-max-conns, --sticky-cache-size and --task-pollers must not be negative")
	case c.CallbackAuth != "" && c.CallbackAuth != CallbackAuthSigned && c.CallbackAuth != CallbackAuthLookup:
		return fmt.Errorf("configuration: --callback-auth must be %s or %s, got %q", CallbackAuthSigned, CallbackAuthLookup, c.CallbackAuth)
	}
	return c.CheckSecretFor(c.listenAddr())
}

// listenAddr is where the callback endpoint listens: the given listener's
// address, else --http-addr.
func (c Config) listenAddr() string {
	if c.Listener != nil {
		return c.Listener.Addr().String()
	}
	return c.HTTPAddr
}

// Tuning derives the workflow tuning from the flags.
func (c Config) Tuning() workflows.Tuning {
	return workflows.NewTuning(c.ConnectTimeout, c.ReadTimeout, c.RequestAttempts, c.UnknownGrace, c.answeredGrace(), c.PollInitial, c.PollMax)
}

// LogAttrs lists the effective configuration with secrets masked.
func (c Config) LogAttrs() []any {
	return append([]any{
		"temporal_address", c.TemporalAddress, "namespace", c.Namespace, "task_queue", c.TaskQueue,
		"database_url", config.MaskURL(c.DatabaseURL), "gateway_url", c.GatewayURL, "callback_url", c.CallbackURL,
		"gateway_secret", config.MaskSecret(c.GatewaySecret), "http_addr", c.HTTPAddr,
		"connect_timeout", c.ConnectTimeout.String(), "read_timeout", c.ReadTimeout.String(),
		"request_attempts", c.RequestAttempts, "idempotency_keys", c.IdempotencyKeys, "unknown_grace", c.UnknownGrace.String(),
		"poll_initial", c.PollInitial.String(), "poll_max", c.PollMax.String(),
		"breaker_window", c.Breaker.Window.String(), "breaker_min_calls", c.Breaker.MinCalls,
		"breaker_failure_rate", c.Breaker.FailureRate, "breaker_consecutive_failures", c.Breaker.ConsecutiveFailures, "breaker_open", c.Breaker.OpenFor.String(),
		"breaker_half_open_calls", c.Breaker.HalfOpenCalls, "breaker_scope", c.breakerScope(), "callback_auth", c.callbackAuth(),
		"request_breaker", c.requestBreaker(),
		"reconcile_interval", c.ReconcileInterval.String(), "reconcile_window", c.ReconcileWindow.String(), "reconcile_rate", c.reconcileRate(),
		"codec_key_file", c.codecKeySource(), "codec_cors_origins", c.CodecOrigins, "codec_token", config.MaskSecret(c.CodecToken),
		"pprof", c.Pprof, "db_max_conns", c.DBMaxConns, "sticky_cache_size", c.StickyCacheSize, "task_pollers", c.TaskPollers,
	}, c.versioningAttrs()...)
}

// breakerScope is BreakerScope with its default, fleet.
func (c Config) breakerScope() string {
	if c.BreakerScope == "" {
		return breaker.ScopeFleet
	}
	return c.BreakerScope
}

// callbackAuth is CallbackAuth with its default: a Config built in code
// (tests) that names none is signed, as the flag's default.
func (c Config) callbackAuth() string {
	if c.CallbackAuth == "" {
		return CallbackAuthSigned
	}
	return c.CallbackAuth
}

// reconcileWindow is ReconcileWindow with its default, the one the sweep
// itself takes for 0 (a Config built in code).
func (c Config) reconcileWindow() time.Duration {
	if c.ReconcileWindow == 0 {
		return workflows.DefaultReconcileWindow
	}
	return c.ReconcileWindow
}

// reconcileRate is ReconcileRate with its default (a Config built in code).
func (c Config) reconcileRate() float64 {
	if c.ReconcileRate == 0 {
		return workflows.DefaultReconcileRate
	}
	return c.ReconcileRate
}

// codecKeySource says where the key ring comes from, never the keys.
func (c Config) codecKeySource() string {
	if c.CodecKeys != "" {
		return "(env " + codec.KeysEnv + ")"
	}
	return c.CodecKeyFile
}
