package outage

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/api/httpapi"
	"github.com/payguard/payguard/codec"
	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/internal/exitcode"
	"github.com/payguard/payguard/internal/process"
	"github.com/payguard/payguard/internal/temporalserver"
	"github.com/payguard/payguard/loadgen"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

// Addresses of the local stack: each process's defaults (docs/design.md §4–6),
// since the demo starts them without address flags.
const (
	temporalAddr = config.DefaultTemporalAddress
	uiAddr       = config.DefaultTemporalUIAddr
	gatewayAddr  = config.DefaultPgsimAddr
	adminAddr    = config.DefaultPgsimAdminAddr
	workerAddr   = config.DefaultWorkerAddr
	apiAddr      = httpapi.DefaultAddr
)

// How the demo's orders are placed (--via).
const (
	ViaTemporal = "temporal" // the workflow started with the Temporal client, as `starter load` does
	ViaAPI      = "api"      // POST /api/v1/orders through the HTTP API, as a checkout would
	ViaVegeta   = "vegeta"   // the same POSTs sent and paced by the vegeta load client (bin/vegeta)
)

// Options of the demo command.
type Options struct {
	Rate     float64
	Duration time.Duration
	DownAt   time.Duration
	UpAt     time.Duration
	Deadline time.Duration
	Out      string
	Bin      string
	Exit     bool
	// Workers is how many worker processes share the fleet breaker; the
	// first listens on the default address, the others on the ports after.
	Workers int
	// Via is ViaTemporal, ViaAPI or ViaVegeta.
	Via string
	// IdempotencyKeys runs the workers with --idempotency-keys (seed
	// 002's way: a re-send under the order's key can never charge twice).
	IdempotencyKeys bool
	// Temporal is which Temporal the stack runs on (--temporal).
	Temporal temporalserver.Kind
}

// Run is the demo's main: start the stack, run the outage, report, then keep
// the stack up for the UI until Ctrl-C (or exit at once with --exit).
// Usage and usage errors go to stderr.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs, o := newFlagSet(getenv)
	fs.SetOutput(stderr)
	if err := config.Parse(fs, args, getenv); err != nil {
		return err
	}
	if o.Workers < 1 || o.Workers > 9 {
		return exitcode.UsageError(fmt.Errorf("--workers must be 1 to 9, got %d", o.Workers))
	}
	if o.Via != ViaTemporal && o.Via != ViaAPI && o.Via != ViaVegeta {
		return exitcode.UsageError(fmt.Errorf("--via must be %s, %s or %s, got %q", ViaTemporal, ViaAPI, ViaVegeta, o.Via))
	}
	return run(ctx, *o, getenv, stdout)
}

// FlagSet is the demo's flag set as Run reads it, unparsed
// (docs/configuration.md is generated from it).
func FlagSet(getenv func(string) string) *flag.FlagSet {
	fs, _ := newFlagSet(getenv)
	return fs
}

// newFlagSet registers the demo's flags over fresh Options.
func newFlagSet(getenv func(string) string) (*flag.FlagSet, *Options) {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	var o Options
	fs.Float64Var(&o.Rate, "rate", 3, "orders per second")
	fs.DurationVar(&o.Duration, "duration", 60*time.Second, "how long orders are placed")
	fs.DurationVar(&o.DownAt, "down-at", 15*time.Second, "when the gateway goes down")
	fs.DurationVar(&o.UpAt, "up-at", 30*time.Second, "when it comes back")
	fs.DurationVar(&o.Deadline, "deadline", time.Minute, "each order's deadline (orders whose outcome stays unknown wait for it)")
	fs.StringVar(&o.Out, "out", "demo-out", "where the logs, report and picture go")
	fs.StringVar(&o.Bin, "bin", "bin", "where temporal, pgsim and worker binaries are")
	fs.IntVar(&o.Workers, "workers", 1, "worker processes, sharing the lookup and create breakers through PostgreSQL (1-9)")
	fs.StringVar(&o.Via, "via", ViaTemporal, "how orders are placed: temporal (the workflow started directly, as `starter load` does) api (POST /api/v1/orders through the HTTP API on "+apiAddr+") or vegeta (the same POSTs sent and paced by the vegeta load client, make vegeta)")
	fs.BoolVar(&o.IdempotencyKeys, "idempotency-keys", false, "run the workers with --idempotency-keys: every create carries the order's Idempotency-Key, which pgsim honours")
	o.Temporal = temporalserver.KindDev
	fs.Var(&o.Temporal, "temporal", temporalserver.KindFlagUsage)
	fs.BoolVar(&o.Exit, "exit", getenv("DEMO_EXIT") == "1", "exit when done instead of keeping the stack up (env DEMO_EXIT=1)")
	return fs, &o
}

// run is the demo once its flags are read.
func run(ctx context.Context, o Options, getenv func(string) string, stdout io.Writer) error {
	workerAddrs := []string{workerAddr}
	for i := 1; i < o.Workers; i++ {
		host, port, _ := net.SplitHostPort(workerAddr)
		p, _ := strconv.Atoi(port)
		workerAddrs = append(workerAddrs, net.JoinHostPort(host, strconv.Itoa(p+i)))
	}
	say := func(format string, a ...any) { fmt.Fprintf(stdout, format+"\n", a...) }
	if loadgen.IsTerminal(stdout) {
		// Clear the live progress line first.
		say = func(format string, a ...any) { fmt.Fprintf(stdout, "\r\033[K"+format+"\n", a...) }
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return err
	}
	addrs := append(temporalAddrs(o.Temporal), gatewayAddr, adminAddr)
	addrs = append(addrs, workerAddrs...)
	if o.Via != ViaTemporal {
		addrs = append(addrs, apiAddr)
	}
	for _, addr := range addrs {
		if l, err := net.Listen("tcp", addr); err != nil {
			return fmt.Errorf("port %s is taken (another payguard stack or dev server running?): stop it first", addr)
		} else {
			l.Close()
		}
	}
	dbURL := config.Env(getenv, "DATABASE_URL", config.DefaultDatabaseURL)
	if err := store.EnsureDatabase(ctx, dbURL); err != nil {
		return fmt.Errorf("postgres (run `make postgres`): %w", err)
	}
	temporalCfg, err := codecKeys(getenv, say)
	if err != nil {
		return err
	}
	procs := &processes{out: o.Out}
	defer procs.stopAll(say)

	if err := startTemporal(ctx, o, procs, temporalCfg, say); err != nil {
		return err
	}
	cl, err := dialTemporal(ctx, temporalCfg, 90*time.Second)
	if err != nil {
		return err
	}
	defer cl.Close()

	say("Starting pgsim (gateway %s, admin %s) and %d worker(s) (%s)...", gatewayAddr, adminAddr, o.Workers, strings.Join(workerAddrs, ", "))
	pgsim, err := procs.start("pgsim", filepath.Join(o.Bin, "pgsim"), "--seed", "1")
	if err != nil {
		return err
	}
	if err := pgsim.WaitFor(ctx, 30*time.Second, "admin API", process.HTTPOK("http://"+adminAddr+"/admin/faults")); err != nil {
		return fmt.Errorf("pgsim did not come up: %w", err)
	}
	var fleetMetrics []string
	for i, addr := range workerAddrs {
		name, args := "worker", []string(nil)
		if i > 0 {
			name = fmt.Sprintf("worker-%d", i+1)
			args = []string{"--http-addr", addr, "--callback-url", "http://" + addr + "/callbacks/gateway"}
			fleetMetrics = append(fleetMetrics, "http://"+addr+"/metrics")
		}
		if o.IdempotencyKeys {
			args = append(args, "--idempotency-keys")
		}
		worker, err := procs.start(name, filepath.Join(o.Bin, "worker"), append([]string{"--codec-key-file", temporalCfg.CodecKeyFile}, args...)...)
		if err != nil {
			return err
		}
		if err := worker.WaitFor(ctx, 60*time.Second, "health", process.HTTPOK("http://"+addr+"/healthz")); err != nil {
			return fmt.Errorf("%s did not come up: %w", name, err)
		}
	}

	var place func(context.Context, workflows.PaymentInput) error
	if o.Via != ViaTemporal {
		say("Starting the order API (%s)...", apiAddr)
		api, err := procs.start("api", filepath.Join(o.Bin, "api"), "--codec-key-file", temporalCfg.CodecKeyFile)
		if err != nil {
			return err
		}
		if err := api.WaitFor(ctx, 60*time.Second, "health", process.HTTPOK("http://"+apiAddr+"/healthz")); err != nil {
			return fmt.Errorf("the API did not come up: %w", err)
		}
		place = httpapi.Placer("http://"+apiAddr, "", &http.Client{Timeout: 30 * time.Second})
	}

	products := []string{"P1", "P2", "P3"}
	st, err := store.Open(ctx, dbURL)
	if err != nil {
		return err
	}
	err = st.SetStocks(ctx, products, 100_000)
	st.Close()
	if err != nil {
		return err
	}

	say("Stack is up. %s", uiNote(o.Temporal, `(filter: OrderStatus="CANCELLED")`))
	say("Outage scenario: %.0f orders/s for %s; gateway down at T+%s, back at T+%s.", o.Rate, o.Duration, o.DownAt, o.UpAt)
	scenario := Scenario{
		Load: loadgen.Config{Rate: o.Rate, Duration: o.Duration, Products: products, TaskQueue: config.DefaultTaskQueue,
			Order:       loadgen.Order{Qty: 1, Amount: 12_000, User: "demo-user", CardType: "SAMSUNG", CardNo: "1234-5678-9814-1451", Deadline: o.Deadline},
			WaitTimeout: o.Deadline + time.Minute, Place: place},
		DownAt: o.DownAt, UpAt: o.UpAt, AdminURL: "http://" + adminAddr, MetricsURL: "http://" + workerAddr + "/metrics",
		FleetMetricsURLs: fleetMetrics, Say: say,
	}
	var attack *vegetaAttack
	if o.Via == ViaVegeta {
		if err := scenario.Load.Validate(); err != nil {
			return err
		}
		ins := scenario.Load.Inputs()
		scenario.OnBegin = func(time.Time) (err error) {
			attack, err = startVegeta(ctx, o.Bin, o.Out, "http://"+apiAddr, o.Rate, ins)
			return err
		}
		scenario.Load.Place = func(ctx context.Context, in workflows.PaymentInput) error { return attack.place(ctx, in) }
	}
	sum, events, stats, err := scenario.Run(ctx, cl, stdout)
	if err != nil {
		return err
	}
	var vegeta *VegetaSummary
	if attack != nil {
		attack.retime(&sum)
		s, err := attack.summary(ctx, o.Bin, sum)
		if err != nil {
			return err
		}
		vegeta = &s
	}
	lookups, err := ScrapeLookupLatency(context.Background(), "http://"+workerAddr+"/metrics")
	if err != nil {
		return err
	}
	report := BuildReport(sum, events, stats, lookups)
	report.Via, report.IdempotencyKeys, report.Vegeta = o.Via, o.IdempotencyKeys, vegeta
	if report.OpenBreakerRefusal, report.OpenBreakerRefusalByEndpoint, err = ScrapeOpenBreakerRefusal(context.Background(), "http://"+workerAddr+"/metrics"); err != nil {
		return err
	}
	if err := addOutcomes(ctx, &report, sum, dbURL); err != nil {
		return err
	}
	fmt.Fprint(stdout, report.Text())
	jsonPath, svgPath := filepath.Join(o.Out, "report.json"), filepath.Join(o.Out, "timeline.svg")
	raw, _ := json.MarshalIndent(report, "", "  ")
	if err := os.WriteFile(jsonPath, raw, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(svgPath, []byte(report.SVG()), 0o644); err != nil {
		return err
	}
	say("\nReport:   %s\nTimeline: %s\nLogs:     %s/{temporal,pgsim,worker}.log", jsonPath, svgPath, o.Out)
	if vegeta != nil && vegeta.Failed > 0 {
		// The article's threshold, http_req_failed == 0.
		return fmt.Errorf("threshold crossed: %d of %d requests failed (want 0)", vegeta.Failed, vegeta.Requests)
	}
	if o.Exit || ctx.Err() != nil {
		return nil
	}
	say("%s — the stack stays up; press Ctrl-C to stop everything.", uiNote(o.Temporal, ""))
	<-ctx.Done()
	return nil
}

// addOutcomes reads the run's orders' outcomes from the database into the
// report.
func addOutcomes(ctx context.Context, r *Report, sum loadgen.Summary, dbURL string) error {
	// After a Ctrl-C too: the run is over, its report still worth writing.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	st, err := store.Open(ctx, dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	outs, err := sum.ReadOutcomes(ctx, st)
	if err != nil {
		return err
	}
	r.AddOutcomes(outs)
	return nil
}

// codecKeys is the demo's Temporal client configuration: the local dev
// server, and the payload codec key ring from PAYGUARD_CODEC_KEYS or
// PAYGUARD_CODEC_KEY_FILE, else the development key file; the file is
// generated on the first run (the worker it starts is given the same file).
func codecKeys(getenv func(string) string, say func(string, ...any)) (config.Common, error) {
	c := config.Common{TemporalAddress: temporalAddr, CodecKeys: getenv(codec.KeysEnv),
		CodecKeyFile: config.Env(getenv, codec.KeyFileEnv, codec.DevKeyFile)}
	if c.CodecKeys == "" {
		created, err := codec.EnsureDevKeyFile(c.CodecKeyFile)
		if err != nil {
			return c, fmt.Errorf("development codec key: %w", err)
		}
		if created {
			say("Generated a development payload codec key in %s (git-ignored; payloads in Temporal are encrypted with it).", c.CodecKeyFile)
		}
	}
	if _, err := c.Codec(); err != nil {
		return c, err
	}
	return c, nil
}

func dialTemporal(ctx context.Context, cfg config.Common, within time.Duration) (client.Client, error) {
	opts, err := cfg.ClientOptions(slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(within)
	for {
		dialCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
		cl, err := client.DialContext(dialCtx, opts)
		cancel()
		if err == nil {
			return cl, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("temporal did not come up: %w", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// processes are the demo's children, stopped in reverse order, and what
// runs once they are (the real server's stop, first of all).
type processes struct {
	out   string
	mu    sync.Mutex
	list  []*process.Process
	after []func()
}

func (p *processes) start(name, path string, args ...string) (*process.Process, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%s binary not found at %s (run `make build tools`): %w", name, path, err)
	}
	// A fresh log each run: the demo starts each child once.
	child := &process.Process{Name: name, Path: path, Args: args, LogDir: p.out, FreshLog: true}
	if err := child.Start(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.list = append(p.list, child)
	p.mu.Unlock()
	return child, nil
}

// demoGrace is how long a child has to stop after SIGTERM before it is killed.
const demoGrace = 15 * time.Second

func (p *processes) stopAll(say func(string, ...any)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.list) - 1; i >= 0; i-- {
		_ = p.list[i].Stop(demoGrace)
	}
	for i := len(p.after) - 1; i >= 0; i-- {
		p.after[i]()
	}
	if len(p.list)+len(p.after) > 0 {
		say("Stopped everything the demo started.")
	}
	p.list, p.after = nil, nil
}
