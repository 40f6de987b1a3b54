package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/payguard/payguard/internal/devserver"
	"github.com/payguard/payguard/internal/process"
	"github.com/payguard/payguard/internal/temporalserver"
	"github.com/payguard/payguard/workflows"
)

// The test binary's one Temporal: the dev server, or the real server on
// PostgreSQL when PAYGUARD_TEMPORAL=server (temporalserver.KindEnv).
var (
	temporalOnce sync.Once
	temporalErr  error
	devServer    *testsuite.DevServer
	devUIPort    string
	realServer   *realTemporal
)

// BuildBinary builds one of payguard's commands (e.g. "./worker") into a
// temporary directory and returns its path.
func BuildBinary(t testing.TB, pkg string) string {
	NeedsServices(t, "a build of "+pkg)
	t.Helper()
	root, err := devserver.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// FreeAddr returns a loopback address nobody listens on right now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := process.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// Temporal returns a client of the test binary's Temporal, started on first
// use with payguard's search attributes, and stopped at exit by
// StopTemporal (call it from TestMain): the dev server, or the real server
// on fresh PostgreSQL databases when PAYGUARD_TEMPORAL=server. The client
// has the payload codec of CodecKeys, as every payguard client does;
// RawTemporal has none.
func Temporal(t testing.TB) client.Client {
	t.Helper()
	NeedsServices(t, "the Temporal server")
	temporalOnce.Do(func() {
		kind, err := temporalserver.ParseKind(os.Getenv(temporalserver.KindEnv))
		if err != nil {
			temporalErr = err
			return
		}
		if kind == temporalserver.KindServer {
			realServer, temporalErr = startRealServer(clientOptions(t))
			return
		}
		temporalErr = startDevServer(clientOptions(t))
	})
	if temporalErr != nil {
		t.Fatalf("temporal: %v", temporalErr)
	}
	if realServer != nil {
		return realServer.client
	}
	return devServer.Client()
}

// clientOptions are the options of the test binary's client.
func clientOptions(t testing.TB) client.Options {
	return client.Options{Namespace: "default", Logger: sdklog.NewStructuredLogger(Logger(t)),
		DataConverter: Codec().DataConverter(), FailureConverter: Codec().FailureConverter()}
}

func startDevServer(opts client.Options) error {
	path, err := devserver.TemporalCLI()
	if err != nil {
		return err
	}
	if _, err := exec.LookPath(path); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	addr, err := process.FreeAddr()
	if err != nil {
		return err
	}
	_, devUIPort, _ = net.SplitHostPort(addr)
	devServer, err = testsuite.StartDevServer(ctx, testsuite.DevServerOptions{
		ExistingPath:  path,
		EnableUI:      true,
		UIPort:        devUIPort,
		LogLevel:      "error",
		ClientOptions: &opts,
		SearchAttributes: temporal.NewSearchAttributes(
			workflows.OrderStatusKey.ValueSet(""), workflows.PaymentStatusKey.ValueSet("")),
		ExtraArgs: append(slices.Clone(devserver.TuningArgs),
			"--dynamic-config-value", fmt.Sprintf("%s=%d", maxDeploymentsKey, maxDeployments)),
		Stdout: os.Stderr,
		Stderr: os.Stderr,
	})
	return err
}

// The server's cap of 100 Worker Deployments a namespace, lifted: every
// stack a test binary starts has its own (NewStackOn).
const (
	maxDeploymentsKey = "matching.maxDeployments"
	maxDeployments    = 10000
)

// TemporalAddress is the running Temporal's frontend address.
func TemporalAddress(t testing.TB) string {
	Temporal(t)
	if realServer != nil {
		return realServer.server.Addr
	}
	return devServer.FrontendHostPort()
}

// TemporalUIURL is the dev server's web UI. The real server has none of its
// own (compose runs temporalio/ui beside it): a test of the UI fails there,
// saying so.
func TemporalUIURL(t testing.TB) string {
	Temporal(t)
	if realServer != nil {
		t.Fatalf("the Temporal UI is the dev server's: run this test without %s=%s", temporalserver.KindEnv, temporalserver.KindServer)
	}
	return "http://127.0.0.1:" + devUIPort
}

// StopTemporal stops the Temporal this binary started, if any.
func StopTemporal() {
	if devServer != nil {
		_ = devServer.Stop()
	}
	if realServer != nil {
		realServer.stop()
	}
}

// Main is the TestMain of every package that uses the dev server: it runs
// the tests, then stops the server this binary started.
func Main(m *testing.M) {
	code := m.Run()
	StopTemporal()
	os.Exit(code)
}
