package outage_test

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/codec"
	"github.com/payguard/payguard/demo/outage"
	"github.com/payguard/payguard/internal/devserver"
	"github.com/payguard/payguard/internal/testenv"
)

// The main job, end to end: the demo binary starts the whole stack on the
// standard ports, runs a short outage, writes its report and picture, keeps
// the stack up until Ctrl-C, and then leaves nothing running.
func TestDemoRunsTheStackAndStopsEverythingOnCtrlC(t *testing.T) {
	bin := demoBin(t, "./demo", "./worker", "./pgsim")
	out := t.TempDir()

	cmd := exec.Command(filepath.Join(bin, "demo"), "--bin", bin, "--out", out,
		"--rate", "4", "--duration", "6s", "--down-at", "2s", "--up-at", "4s", "--deadline", "10s")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+testenv.NewDatabase(t), "DEMO_EXIT=",
		codec.KeyFileEnv+"="+filepath.Join(out, "codec-keys"), codec.KeysEnv+"=") // its first run: the demo makes the key
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	lines := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var seen []string
	deadline := time.After(3 * time.Minute)
wait:
	for {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "demo ended early:\n%s", strings.Join(seen, "\n"))
			seen = append(seen, l)
			if strings.Contains(l, "press Ctrl-C") {
				break wait
			}
		case <-deadline:
			t.Fatalf("demo never finished its run:\n%s", strings.Join(seen, "\n"))
		}
	}
	all := strings.Join(seen, "\n")
	assert.Contains(t, all, "gateway DOWN")
	assert.Contains(t, all, "orders failed to start  0")

	var report outage.Report
	raw, err := os.ReadFile(filepath.Join(out, "report.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &report))
	assert.Equal(t, 24, report.Started)
	assert.Zero(t, report.FailedToStart)
	assert.Zero(t, report.OrdersChargedTwice)
	assert.Len(t, report.Gateway, 2)
	// Lost orders, from the database: every order started is there and
	// final, split between the gateway up and down; no operator cancels in
	// the demo, so every CANCELLED order is lost (a refunded one may also
	// be FAILED).
	o := report.Outcomes
	assert.Equal(t, 24, o.Orders)
	assert.Equal(t, 24, o.Final)
	assert.Equal(t, o.Orders, report.PlacedWhileUp.Orders+report.PlacedInOutage.Orders)
	assert.Positive(t, report.PlacedInOutage.Orders, "orders placed between T+2s and T+4s")
	assert.Equal(t, o.Lost, o.LostByKind["cancelled"]+o.LostByKind["refunded"])
	assert.Equal(t, o.Lost, report.PlacedWhileUp.Lost+report.PlacedInOutage.Lost)
	assert.GreaterOrEqual(t, report.Final["CANCELLED"], o.LostByKind["cancelled"])
	assert.LessOrEqual(t, report.Final["CANCELLED"], o.Lost)
	assert.Equal(t, 24, o.FinalLatency.Count)
	assert.Equal(t, report.PlacedInOutage.Final, report.OutageEndToFinal.Count)
	assert.Contains(t, all, "lost orders")
	assert.Contains(t, all, "outage end -> final status")
	svg, err := os.ReadFile(filepath.Join(out, "timeline.svg"))
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(svg), "<svg"))

	// The stack is still up for the UI...
	for _, addr := range []string{"127.0.0.1:7233", "127.0.0.1:8233", "127.0.0.1:8090", "127.0.0.1:8091", "127.0.0.1:8081"} {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		require.NoError(t, err, "%s up while the demo waits", addr)
		c.Close()
	}
	// ...until Ctrl-C, which stops everything the demo started.
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	for range lines {
	}
	require.NoError(t, cmd.Wait(), "a clean exit on Ctrl-C")
	allClosed(t, "127.0.0.1:7233", "127.0.0.1:8233", "127.0.0.1:8090", "127.0.0.1:8091", "127.0.0.1:8081")
}

// The same outage through the HTTP order API (make demo-api), a 20 s
// smoke, with every create under the order's Idempotency-Key
// (--idempotency-keys): every order is a POST answered 201, none fails,
// all end final and nothing is charged twice; with --exit the demo leaves
// nothing running.
func TestDemoThroughTheAPI(t *testing.T) {
	bin := demoBin(t, "./demo", "./worker", "./pgsim", "./api")
	out := t.TempDir()
	cmd := exec.Command(filepath.Join(bin, "demo"), "--bin", bin, "--out", out, "--via", outage.ViaAPI, "--idempotency-keys", "--exit",
		"--rate", "3", "--duration", "20s", "--down-at", "5s", "--up-at", "10s", "--deadline", "30s")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+testenv.NewDatabase(t),
		codec.KeyFileEnv+"="+filepath.Join(out, "codec-keys"), codec.KeysEnv+"=")
	output, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", output)
	assert.Contains(t, string(output), "orders placed via       api")

	var report outage.Report
	raw, err := os.ReadFile(filepath.Join(out, "report.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &report))
	assert.Equal(t, outage.ViaAPI, report.Via)
	assert.True(t, report.IdempotencyKeys)
	assert.Contains(t, string(output), "creates sent            under keys")
	workerLog, err := os.ReadFile(filepath.Join(out, "worker.log"))
	require.NoError(t, err)
	assert.Contains(t, string(workerLog), `"idempotency_keys":true`, "the worker sends its creates under keys")
	assert.Equal(t, 60, report.Started)
	assert.Zero(t, report.FailedToStart, "no request failed")
	assert.Equal(t, 60, report.FirstAnswerClosed.Count+report.FirstAnswerOpen.Count, "every order answered")
	assert.Positive(t, report.FirstAnswerOpen.Count, "answers while the breaker was not closed")
	assert.Equal(t, 60, report.Outcomes.Final, "every order final")
	assert.Zero(t, report.OrdersChargedTwice)
	t.Logf("first answer: closed p50 %.1f p95 %.1f ms, open p50 %.1f p95 %.1f ms; lost %s",
		report.FirstAnswerClosed.P50, report.FirstAnswerClosed.P95, report.FirstAnswerOpen.P50, report.FirstAnswerOpen.P95, report.Outcomes.LostLine())
	allClosed(t, "127.0.0.1:7233", "127.0.0.1:8090", "127.0.0.1:8081", "127.0.0.1:8080")
}

// The first article's load test with a real load client (make
// demo-vegeta), a 20 s smoke: vegeta itself paces and sends one POST per
// order through the API and times its answers; none fails (the article's
// threshold), some are answered PENDING while the breaker is open, every
// order ends final, nothing is charged twice, and vegeta's own report is
// printed beside the demo's.
func TestDemoThroughVegeta(t *testing.T) {
	bin := demoBin(t, "./demo", "./worker", "./pgsim", "./api")
	vegeta := os.Getenv("PAYGUARD_VEGETA")
	if vegeta == "" {
		vegeta, _ = filepath.Abs("../../bin/vegeta")
	}
	if _, err := os.Stat(vegeta); err != nil {
		t.Fatalf("vegeta not found (make vegeta, or PAYGUARD_VEGETA=path): %v", err)
	}
	require.NoError(t, os.Symlink(vegeta, filepath.Join(bin, "vegeta")))
	out := t.TempDir()
	cmd := exec.Command(filepath.Join(bin, "demo"), "--bin", bin, "--out", out, "--via", outage.ViaVegeta, "--exit",
		"--rate", "3", "--duration", "20s", "--down-at", "5s", "--up-at", "10s", "--deadline", "30s")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+testenv.NewDatabase(t),
		codec.KeyFileEnv+"="+filepath.Join(out, "codec-keys"), codec.KeysEnv+"=")
	output, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", output)
	assert.Contains(t, string(output), "POST /api/v1/orders answered, timed by vegeta")
	assert.Contains(t, string(output), "vegeta report:")
	assert.Contains(t, string(output), "Success", "vegeta's own report")

	var report outage.Report
	raw, err := os.ReadFile(filepath.Join(out, "report.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &report))
	require.NotNil(t, report.Vegeta)
	assert.Equal(t, 60, report.Vegeta.Requests, "one request per order, none repeated")
	assert.Equal(t, map[string]int{"201": 60}, report.Vegeta.StatusCodes)
	assert.Zero(t, report.Vegeta.Failed)
	assert.Positive(t, report.Vegeta.PendingWhileOpen, "answered 'payment being confirmed' while the breaker was open")
	assert.Equal(t, 60, report.Started)
	assert.Equal(t, 60, report.FirstAnswerClosed.Count+report.FirstAnswerOpen.Count, "every order answered")
	assert.Equal(t, 60, report.Outcomes.Final, "every order final")
	assert.Zero(t, report.OrdersChargedTwice)
	results, err := os.ReadFile(filepath.Join(out, "vegeta-results.json"))
	require.NoError(t, err)
	assert.Equal(t, 60, strings.Count(string(results), "\n"), "vegeta's results, one per order")
	t.Logf("first answer: closed p50 %.1f p95 %.1f ms, open p50 %.1f p95 %.1f ms; lost %s",
		report.FirstAnswerClosed.P50, report.FirstAnswerClosed.P95, report.FirstAnswerOpen.P50, report.FirstAnswerOpen.P95, report.Outcomes.LostLine())
	allClosed(t, "127.0.0.1:7233", "127.0.0.1:8090", "127.0.0.1:8081", "127.0.0.1:8080")
}

// allClosed waits until nothing listens on any of addrs: nothing the demo
// started is left running.
func allClosed(t *testing.T, addrs ...string) {
	t.Helper()
	for _, addr := range addrs {
		testenv.Eventually(t, 10*time.Second, func() bool {
			c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
			if err == nil {
				c.Close()
			}
			return err != nil
		}, addr+" closed: nothing left running")
	}
}

// demoBin is a --bin folder holding the binaries of pkgs and the temporal CLI.
func demoBin(t *testing.T, pkgs ...string) string {
	t.Helper()
	bin := t.TempDir()
	for _, pkg := range pkgs {
		require.NoError(t, os.Rename(testenv.BuildBinary(t, pkg), filepath.Join(bin, filepath.Base(pkg))))
	}
	cli, err := devserver.TemporalCLI()
	require.NoError(t, err)
	require.NoError(t, os.Symlink(cli, filepath.Join(bin, "temporal")))
	return bin
}
