package testenv

import (
	"context"
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
	"github.com/payguard/payguard/workflows"
)

var (
	devOnce   sync.Once
	devServer *testsuite.DevServer
	devUIPort string
	devErr    error
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

// Temporal returns a client of the test binary's dev server, started on
// first use with payguard's search attributes, and stopped at exit by
// StopTemporal (call it from TestMain). The client has the payload codec of
// CodecKeys, as every payguard client does; RawTemporal has none.
func Temporal(t testing.TB) client.Client {
	t.Helper()
	NeedsServices(t, "the Temporal dev server")
	devOnce.Do(func() {
		path, err := devserver.TemporalCLI()
		if err != nil {
			devErr = err
			return
		}
		if _, err := exec.LookPath(path); err != nil {
			devErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		addr, err := process.FreeAddr()
		if err != nil {
			devErr = err
			return
		}
		_, devUIPort, _ = net.SplitHostPort(addr)
		devServer, devErr = testsuite.StartDevServer(ctx, testsuite.DevServerOptions{
			ExistingPath: path,
			EnableUI:     true,
			UIPort:       devUIPort,
			LogLevel:     "error",
			ClientOptions: &client.Options{Namespace: "default",
				Logger:        sdklog.NewStructuredLogger(Logger(t)),
				DataConverter: Codec().DataConverter(), FailureConverter: Codec().FailureConverter()},
			SearchAttributes: temporal.NewSearchAttributes(
				workflows.OrderStatusKey.ValueSet(""), workflows.PaymentStatusKey.ValueSet("")),
			ExtraArgs: append(slices.Clone(devserver.TuningArgs), deploymentsArgs...),
			Stdout:    os.Stderr,
			Stderr:    os.Stderr,
		})
	})
	if devErr != nil {
		t.Fatalf("temporal dev server: %v", devErr)
	}
	return devServer.Client()
}

// deploymentsArgs lift the server's cap of 100 Worker Deployments a
// namespace: every stack a test binary starts has its own (NewStackOn).
var deploymentsArgs = []string{"--dynamic-config-value", "matching.maxDeployments=10000"}

// TemporalAddress is the running dev server's frontend address.
func TemporalAddress(t testing.TB) string {
	Temporal(t)
	return devServer.FrontendHostPort()
}

// TemporalUIURL is the dev server's web UI.
func TemporalUIURL(t testing.TB) string {
	Temporal(t)
	return "http://127.0.0.1:" + devUIPort
}

// StopTemporal stops the dev server if one was started.
func StopTemporal() {
	if devServer != nil {
		_ = devServer.Stop()
	}
}

// Main is the TestMain of every package that uses the dev server: it runs
// the tests, then stops the server this binary started.
func Main(m *testing.M) {
	code := m.Run()
	StopTemporal()
	os.Exit(code)
}
