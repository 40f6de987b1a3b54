package simulator

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/internal/exitcode"
	"github.com/payguard/payguard/telemetry"
)

// Run is pgsim's main: it parses flags (each from its variable, config.Parse),
// serves until ctx ends, then shuts down. It logs to stdout; the usage goes
// to stderr.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := ParseFlags(args, getenv, stderr)
	if err != nil {
		return err // -h and --version too: exitcode.Main tells them apart
	}
	cfg.Logger = slog.New(slog.NewJSONHandler(stdout, &slog.HandlerOptions{Level: cfg.LogLevel}))
	stopTracing, err := telemetry.Setup(ctx, "pgsim", getenv)
	if err != nil {
		return err
	}
	defer func() { _ = stopTracing(context.Background()) }()
	s := New(cfg)
	if err := s.Start(); err != nil {
		return err
	}
	faults, _ := json.Marshal(cfg.Faults)
	cfg.Logger.Info("pgsim listening", "gateway_url", s.GatewayURL(), "admin_url", s.AdminURL(), "seed", cfg.Seed,
		"idempotency", cfg.Idempotency, "secret", config.MaskSecret(string(cfg.Secret)), "signed_callbacks", !cfg.UnsignedCallbacks,
		"callback_url_prefix", cfg.CallbackURLPrefix, "faults", string(faults))
	<-ctx.Done()
	cfg.Logger.Info("pgsim stopping")
	return s.Close()
}

// ParseFlags reads pgsim's flags; usage is where -h and a mistake print
// the usage. A mistake is a usage error (exit 2), named by its flag.
func ParseFlags(args []string, getenv func(string) string, usage io.Writer) (Config, error) {
	fs, finish := newFlagSet(getenv)
	fs.SetOutput(usage)
	if err := config.Parse(fs, args, getenv); err != nil {
		return Config{}, err
	}
	cfg, err := finish()
	return cfg, exitcode.UsageError(err)
}

// FlagSet is pgsim's flag set as ParseFlags reads it, unparsed
// (docs/configuration.md is generated from it).
func FlagSet(getenv func(string) string) *flag.FlagSet {
	fs, _ := newFlagSet(getenv)
	return fs
}

// newFlagSet registers pgsim's flags over a fresh Config; finish completes
// and validates it once they are parsed.
func newFlagSet(getenv func(string) string) (fs *flag.FlagSet, finish func() (Config, error)) {
	fs = flag.NewFlagSet("pgsim", flag.ContinueOnError)
	d := DefaultFaults()
	cfg := Config{Faults: d}
	var secret string
	var seed int64
	fs.StringVar(&cfg.Addr, "addr", config.DefaultPgsimAddr, "gateway API listen address")
	fs.StringVar(&cfg.AdminAddr, "admin-addr", config.DefaultPgsimAdminAddr, "admin API listen address (keep it on loopback)")
	fs.Int64Var(&seed, "seed", time.Now().UnixNano(), "random seed; the same seed repeats a run")
	fs.StringVar(&secret, "secret", config.GatewaySecret(getenv), "callback signing secret (env GATEWAY_SECRET, as the worker)")
	var signed bool
	fs.BoolVar(&signed, "sign-callbacks", true, "sign callbacks (X-Timestamp, X-Signature); false sends them unsigned, as the Loopers simulator")
	fs.StringVar(&cfg.CallbackURLPrefix, "callback-url-prefix", "", "refuse a create whose callbackUrl does not start with this (empty: any http(s) URL; http://localhost:8080 is the simulator's rule)")
	fs.BoolVar(&cfg.Idempotency, "idempotency", true, "honour Idempotency-Key headers")
	fs.DurationVar(&cfg.IdempotencyTTL, "idempotency-ttl", 15*24*time.Hour, "how long an idempotency key is kept")

	f := &cfg.Faults
	fs.BoolVar(&f.Down, "down", false, "start with the gateway port closed")
	durationVar(fs, &f.Latency.Min, "latency-min", "least latency added to every answer")
	durationVar(fs, &f.Latency.Max, "latency-max", "most latency added to every answer")
	for _, ep := range []struct {
		name string
		f    *EndpointFaults
	}{{"create", &f.Create.EndpointFaults}, {"lookup", &f.Lookup}, {"cancel", &f.Cancel}} {
		fs.Float64Var(&ep.f.ErrorRate, ep.name+"-error-rate", ep.f.ErrorRate, "share of "+ep.name+" calls answered with an injected error")
		fs.IntVar(&ep.f.ErrorStatus, ep.name+"-error-status", ep.f.ErrorStatus, "HTTP status of injected "+ep.name+" errors")
		fs.IntVar(&ep.f.FailNext, ep.name+"-fail-next", 0, "the next n "+ep.name+" calls fail")
		fs.Float64Var(&ep.f.TimeoutRate, ep.name+"-timeout-rate", 0, "share of "+ep.name+" calls done but answered only after the timeout delay")
		durationVar(fs, &ep.f.TimeoutDelay, ep.name+"-timeout-delay", "how long a timed-out "+ep.name+" answer is held")
	}
	fs.Float64Var(&f.Create.CreatedThen500Rate, "create-created-then-500-rate", 0,
		"share of create calls that create the transaction and then answer 500 (a lookup by order id finds it)")
	durationVar(fs, &f.Processing.Min, "processing-min", "least time before a transaction is decided")
	durationVar(fs, &f.Processing.Max, "processing-max", "most time before a transaction is decided")
	fs.Float64Var(&f.Processing.SuccessRate, "success-rate", f.Processing.SuccessRate, "share of transactions that succeed")
	fs.Float64Var(&f.Callback.DropRate, "callback-drop-rate", 0, "share of callbacks never sent")
	durationVar(fs, &f.Callback.Delay, "callback-delay", "delay before each callback")
	config.RegisterLogLevel(fs, &cfg.LogLevel)
	fs.Float64Var(&f.Callback.DuplicateRate, "callback-duplicate-rate", 0, "share of callbacks sent twice")

	return fs, func() (Config, error) {
		cfg.Seed = uint64(seed)
		cfg.Secret = []byte(secret)
		cfg.UnsignedCallbacks = !signed
		if err := cfg.Faults.ValidateFlags(); err != nil {
			return Config{}, err
		}
		return cfg, nil
	}
}

type durationFlag struct{ d *Duration }

func (f durationFlag) String() string {
	if f.d == nil {
		return ""
	}
	return time.Duration(*f.d).String()
}

// Set reads "250ms" or a number of milliseconds, like the admin API.
func (f durationFlag) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err == nil {
		*f.d = Duration(v)
		return nil
	}
	ms, err2 := strconv.ParseFloat(s, 64)
	if err2 != nil {
		return err
	}
	*f.d, err = fromMillis(ms)
	return err
}

func durationVar(fs *flag.FlagSet, d *Duration, name, usage string) {
	fs.Var(durationFlag{d}, name, usage)
}
