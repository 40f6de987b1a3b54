package temporalserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/payguard/payguard/internal/devserver"
	"github.com/payguard/payguard/internal/process"
	"github.com/payguard/payguard/workflows"
)

// StopGrace is how long the server is given to stop before it is killed:
// its services drain their shards and leave the membership ring.
const StopGrace = 20 * time.Second

// startWithin bounds a start: the first on fresh databases creates the
// system namespace and the shards (a few seconds), a machine shared with
// test binaries takes longer.
const startWithin = 2 * time.Minute

// Retention is the namespace's workflow retention: a development server
// keeps closed orders three days, as the dev server does not bound them.
const Retention = 72 * time.Hour

// Options say which server to start.
type Options struct {
	Binary   string // temporal-server (ServerBinary)
	Settings Settings
	// Out is the directory for the server's log (temporal.log) and, when
	// DynamicConfig is set, its dynamic config file.
	Out string
	// DynamicConfig are dynamic config values added to the repository's
	// (e.g. a test binary's higher Worker Deployment limit); a key the
	// repository's file already sets must not be given again.
	DynamicConfig map[string]any
	// Dial is how the server's readiness and setup calls connect (a
	// client of the frontend, e.g. with payguard's codec); nil dials plainly.
	Dial func(ctx context.Context, addr string) (client.Client, error)
}

// Server is a running Temporal server.
type Server struct {
	// Addr is the frontend's gRPC address.
	Addr string
	proc *process.Process
	dial func(ctx context.Context, addr string) (client.Client, error)
}

// Start starts the server on o.Settings' databases (already set up:
// Databases.Setup), waits until its frontend answers, creates Namespace
// and registers payguard's search attributes (both skipped when there
// already), and returns when a client can use them.
func Start(ctx context.Context, o Options) (*Server, error) {
	root, err := devserver.ModuleRoot()
	if err != nil {
		return nil, err
	}
	if len(o.DynamicConfig) > 0 {
		if o.Settings.DynamicConfig, err = writeDynamicConfig(o.Settings.DynamicConfig, o.Out, o.DynamicConfig); err != nil {
			return nil, err
		}
	}
	s := &Server{Addr: o.Settings.FrontendAddr(), dial: o.Dial,
		proc: &process.Process{Name: "temporal", Path: o.Binary, Args: Args(root), Env: o.Settings.Env(), LogDir: o.Out}}
	if s.dial == nil {
		s.dial = func(ctx context.Context, addr string) (client.Client, error) {
			return client.DialContext(ctx, client.Options{HostPort: addr, Namespace: Namespace,
				Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
		}
	}
	if err := s.start(ctx); err != nil {
		_ = s.Stop()
		return nil, err
	}
	if err := s.setup(ctx); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// writeDynamicConfig writes the repository's dynamic config with extra
// appended into dir, and returns its path.
func writeDynamicConfig(repo, dir string, extra map[string]any) (string, error) {
	raw, err := os.ReadFile(repo)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.Write(raw)
	for k, v := range extra {
		fmt.Fprintf(&b, "\n%s:\n  - value: %v\n", k, v)
	}
	path := filepath.Join(dir, DynamicConfigFile)
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}

func (s *Server) start(ctx context.Context) error {
	if err := s.proc.Start(); err != nil {
		return err
	}
	return s.proc.WaitFor(ctx, startWithin, "frontend", FrontendHealthy(s.dialOnce))
}

// FrontendHealthy is a readiness check for process.WaitFor: a fresh client
// from dial answers the frontend's health check. A dev server and the real
// server are both ready by it.
func FrontendHealthy(dial func(context.Context) (client.Client, error)) func(context.Context) bool {
	return func(ctx context.Context) bool {
		cl, err := dial(ctx)
		if err != nil {
			return false
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		_, err = cl.CheckHealth(ctx, &client.CheckHealthRequest{})
		return err == nil
	}
}

func (s *Server) dialOnce(ctx context.Context) (client.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return s.dial(ctx, s.Addr)
}

// setup creates the namespace and registers the search attributes, each
// retried until the server takes it: a fresh server's frontend answers
// health before its namespace registry has loaded.
func (s *Server) setup(ctx context.Context) error {
	cl, err := s.dialOnce(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	register := func(ctx context.Context) error {
		_, err := cl.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
			Namespace: Namespace, WorkflowExecutionRetentionPeriod: durationpb.New(Retention)})
		var exists *serviceerror.NamespaceAlreadyExists
		if errors.As(err, &exists) {
			return nil
		}
		return err
	}
	if err := s.retry(ctx, "namespace "+Namespace, register); err != nil {
		return err
	}
	want := SearchAttributes()
	addAttributes := func(ctx context.Context) error {
		have, err := cl.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: Namespace})
		if err != nil {
			return err
		}
		missing := map[string]enumspb.IndexedValueType{}
		for name, typ := range want {
			if got, ok := have.GetCustomAttributes()[name]; !ok {
				missing[name] = typ
			} else if got != typ {
				return fmt.Errorf("search attribute %s is %s, want %s", name, got, typ)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		_, err = cl.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
			Namespace: Namespace, SearchAttributes: missing})
		if err == nil {
			err = fmt.Errorf("search attributes %v added, not yet listed", keysOf(missing))
		}
		return err
	}
	if err := s.retry(ctx, "search attributes", addAttributes); err != nil {
		return err
	}
	// Listed is not yet usable: the frontend maps the attributes through
	// its namespace registry, refreshed from the database every 2 s
	// (system.namespaceCacheRefreshInterval). A query by each one is
	// refused until it has them; history's registry refreshes alike.
	queryable := func(ctx context.Context) error {
		for name := range want {
			if _, err := cl.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
				Namespace: Namespace, Query: name + " = 'probe'"}); err != nil {
				return err
			}
		}
		return nil
	}
	return s.retry(ctx, "search attributes in the namespace registry", queryable)
}

// retry runs step every 200 ms until it succeeds, the server dies or
// startWithin passes.
func (s *Server) retry(ctx context.Context, what string, step func(context.Context) error) error {
	var last error
	err := s.proc.WaitFor(ctx, startWithin, what, func(ctx context.Context) bool {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		last = step(ctx)
		return last == nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w: %v", err, last)
	}
	return err
}

// SearchAttributes are payguard's search attributes (workflows.OrderStatusKey,
// PaymentStatusKey), as devserver.SearchAttributeArgs registers them on the
// dev server.
func SearchAttributes() map[string]enumspb.IndexedValueType {
	return map[string]enumspb.IndexedValueType{
		workflows.OrderStatusKey.GetName():   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		workflows.PaymentStatusKey.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	}
}

func keysOf(m map[string]enumspb.IndexedValueType) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Restart stops the server (SIGTERM, then SIGKILL after StopGrace) and
// starts it again on the same databases and ports: a crash and recovery of
// the whole cluster, as chaos injects it.
func (s *Server) Restart(ctx context.Context) error {
	if err := s.proc.Stop(StopGrace); err != nil {
		return err
	}
	return s.start(ctx)
}

// Stop stops the server; its databases stay (Databases.Drop).
func (s *Server) Stop() error { return s.proc.Stop(StopGrace) }

// Running reports whether the server process is up.
func (s *Server) Running() bool { return s.proc.Running() }

// CPUTime is the server's CPU time so far (the bench's cost per order).
func (s *Server) CPUTime() time.Duration { return s.proc.CPUTime() }

// LogPath is the server's log file.
func (s *Server) LogPath() string { return s.proc.LogPath() }

// FreePortBase finds a base from which Ports loopback ports are free right
// now, for a server beside others (tests, chaos): in 20000–32759, as the
// SQL schema keeps membership ports in a smallint; never DefaultPortBase,
// which is a user's `make temporal-server`.
func FreePortBase() (int, error) {
	const lo, span = 20000, 12750
	b := lo + int(time.Now().UnixNano()%(span/10))*10
	for range 50 {
		if portsFree(b) {
			return b, nil
		}
		b = lo + (b-lo+977)%span
	}
	return 0, errors.New("no free range of loopback ports for a Temporal server")
}

func portsFree(base int) bool {
	var open []net.Listener
	defer func() {
		for _, l := range open {
			l.Close()
		}
	}()
	for p := base; p < base+Ports; p++ {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			return false
		}
		open = append(open, l)
	}
	return true
}
