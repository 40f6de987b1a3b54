package testenv

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/codec"
	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/deployment"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/worker/service"
)

// Stack is the whole of payguard on real components: a fresh database, the
// shared dev server, an in-process pgsim and a worker on its own task queue.
type Stack struct {
	Store     *store.Store
	Sim       *simulator.Server
	Worker    *service.Worker
	Config    service.Config
	DBURL     string
	TaskQueue string
}

// FastConfig shortens the worker's waits so tests run in seconds.
func FastConfig() service.Config {
	return service.Config{
		// The grace must exceed the send window (2 s) plus the connect
		// timeout, and the read timeout (service.Config.Validate).
		ConnectTimeout: 250 * time.Millisecond, ReadTimeout: time.Second,
		UnknownGrace: 2500 * time.Millisecond, PollInitial: 500 * time.Millisecond, PollMax: 2 * time.Second,
		Breaker:         activities.BreakerSettings{Window: 10 * time.Second, MinCalls: 5, FailureRate: 0.5, OpenFor: 2 * time.Second, HalfOpenCalls: 3},
		ShutdownTimeout: 5 * time.Second,
		Common:          config.Common{CodecKeys: CodecKeys()},
	}
}

// NewStack starts a stack; tune adjusts the worker's configuration.
func NewStack(t testing.TB, faults simulator.Faults, tune func(*service.Config)) *Stack {
	t.Helper()
	return NewStackOn(t, Pgsim(t, faults), tune)
}

// NewStackOn starts a stack on a simulator the test built (PgsimWith).
func NewStackOn(t testing.TB, sim *simulator.Server, tune func(*service.Config)) *Stack {
	t.Helper()
	s := &Stack{DBURL: NewDatabase(t), Sim: sim, TaskQueue: ID("payments")}
	cfg := FastConfig()
	if tune != nil {
		tune(&cfg)
	}
	l := Listen(t)
	cfg.Listener = l
	cfg.TemporalAddress = TemporalAddress(t)
	cfg.Namespace = "default"
	cfg.TaskQueue = s.TaskQueue
	cfg.DatabaseURL = s.DBURL
	cfg.GatewayURL = s.Sim.GatewayURL()
	cfg.GatewaySecret = Secret
	cfg.CallbackURL = "http://" + l.Addr().String() + "/callbacks/gateway"
	cfg.HTTPAddr = l.Addr().String()
	if cfg.DeploymentName == "" {
		// A deployment of its own, as a fleet has: the tests' stacks share
		// one dev server, and a test that moves its deployment's current
		// version moves no other stack's.
		cfg.DeploymentName = s.TaskQueue
	}
	s.Config = cfg
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var err error
	s.Worker, err = service.Start(ctx, cfg, Logger(t))
	if err != nil {
		t.Fatalf("start worker: %v", err)
	}
	t.Cleanup(func() { _ = s.Worker.Stop() })
	s.Store, err = store.Open(ctx, s.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Store.Close)
	return s
}

// StartWorker starts one more worker on the stack (its task queue,
// database, gateway and deployment), on a listener of its own, with the
// stack's configuration adjusted by tune (when not nil), e.g. another
// build. It is stopped when the test ends, if the test has not stopped it.
func (s *Stack) StartWorker(t testing.TB, tune func(*service.Config)) *service.Worker {
	t.Helper()
	cfg := s.Config
	l := Listen(t)
	cfg.Listener, cfg.HTTPAddr = l, l.Addr().String()
	cfg.CallbackURL = "http://" + l.Addr().String() + "/callbacks/gateway"
	if tune != nil {
		tune(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := service.Start(ctx, cfg, Logger(t))
	if err != nil {
		t.Fatalf("start another worker: %v", err)
	}
	t.Cleanup(func() { _ = w.Stop() })
	return w
}

// Listen opens a listener on a free loopback port, for a worker's HTTP
// endpoints.
func Listen(t testing.TB) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Getenv is the environment a starter command sees for this stack.
func (s *Stack) Getenv(key string) string {
	switch key {
	case "TEMPORAL_ADDRESS":
		return s.Config.TemporalAddress
	case "TEMPORAL_NAMESPACE":
		return "default"
	case "TASK_QUEUE":
		return s.TaskQueue
	case "DATABASE_URL":
		return s.DBURL
	case "GATEWAY_URL":
		return s.Sim.GatewayURL()
	case "GATEWAY_SECRET":
		return Secret
	case "CALLBACK_URL":
		return s.Config.CallbackURL
	case codec.KeysEnv:
		return s.Config.CodecKeys
	case deployment.NameEnv:
		return s.Config.DeploymentName
	}
	return ""
}

// MetricsURL is the worker's /metrics.
func (s *Stack) MetricsURL() string { return "http://" + s.Worker.Addr() + "/metrics" }

// Eventually polls cond every 50 ms until it holds or within passes.
func Eventually(t testing.TB, within time.Duration, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for: %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
