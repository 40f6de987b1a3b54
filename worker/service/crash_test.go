package service_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/codec"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/starter/cli"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

// The worker is killed (SIGKILL) while its create is on the wire. The
// restarted worker must not send a second create: it finds the attempt
// recorded as sent and unanswered, looks the order up, and finishes it.
func TestWorkerKilledMidCreateFinishesWithOneCreate(t *testing.T) {
	t.Parallel()
	binary := testenv.BuildBinary(t, "./worker")
	f := testenv.QuietFaults()
	f.Latency = simulator.Range{Min: simulator.Duration(3 * time.Second), Max: simulator.Duration(3 * time.Second)}
	sim := testenv.Pgsim(t, f)
	dbURL := testenv.NewDatabase(t)
	httpAddr := testenv.FreeAddr(t)
	env := map[string]string{
		"TEMPORAL_ADDRESS": testenv.TemporalAddress(t), "TASK_QUEUE": testenv.ID("crash"), "DATABASE_URL": dbURL,
		"GATEWAY_URL": sim.GatewayURL(), "GATEWAY_SECRET": testenv.Secret, "CALLBACK_URL": "http://" + httpAddr + "/callbacks/gateway",
		codec.KeysEnv: testenv.CodecKeys(),
	}
	args := []string{"--http-addr", httpAddr, "--read-timeout", "5s", "--poll-initial", "500ms", "--poll-max", "1s", "--unknown-grace", "1s"}
	start := func() *exec.Cmd {
		cmd := exec.Command(binary, args...)
		cmd.Env = os.Environ()
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		if os.Getenv("PAYGUARD_TEST_LOG") == "1" {
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		}
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		testenv.Eventually(t, 30*time.Second, func() bool {
			resp, err := http.Get("http://" + httpAddr + "/healthz")
			if err == nil {
				resp.Body.Close()
			}
			return err == nil && resp.StatusCode == 200
		}, "worker healthy")
		return cmd
	}
	first := start()

	ctx := context.Background()
	st, err := store.Open(ctx, dbURL)
	require.NoError(t, err)
	defer st.Close()
	_, err = st.SetStock(ctx, "P1", 5)
	require.NoError(t, err)
	getenv := func(k string) string { return env[k] }
	require.NoError(t, cli.Run(ctx, []string{"order", "--product", "P1", "--qty", "2", "--amount", "5000", "--order-id", "crash-1"},
		cli.Env{Getenv: getenv, Stdout: devNull{}, Stderr: devNull{}}))

	testenv.Eventually(t, 30*time.Second, func() bool {
		list, err := st.Attempts(ctx, "crash-1")
		return err == nil && len(list) == 1 && list[0].State == "SENDING"
	}, "create on the wire")
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_, _ = first.Process.Wait()
	testenv.PatchFaults(t, sim, map[string]any{"latency": map[string]any{"min": 0, "max": 0}})

	second := start()
	testenv.Eventually(t, 60*time.Second, func() bool {
		o, err := st.GetOrder(ctx, "crash-1")
		return err == nil && o.Status == status.OrderConfirmed
	}, "order confirmed after the restart")
	stats := sim.Stats().Orders["crash-1"]
	assert.Equal(t, 1, stats.CreateRequests, "exactly one create reached the gateway")
	assert.Len(t, stats.Transactions, 1)
	attempts, err := st.Attempts(ctx, "crash-1")
	require.NoError(t, err)
	require.Len(t, attempts, 1, "the retry after the crash sent nothing")
	assert.Equal(t, store.OutcomeUnknown, attempts[0].Outcome)
	stock, err := st.GetStock(ctx, "P1")
	require.NoError(t, err)
	assert.Equal(t, store.Stock{ProductID: "P1", Total: 5, Available: 3, Sold: 2}, stock)

	// SIGTERM is a graceful stop: the process exits 0 and the port closes.
	require.NoError(t, second.Process.Signal(syscall.SIGTERM))
	exited := make(chan error, 1)
	go func() { exited <- second.Wait() }()
	select {
	case err := <-exited:
		assert.NoError(t, err, "clean exit on SIGTERM")
	case <-time.After(30 * time.Second):
		t.Fatal("worker did not stop on SIGTERM")
	}
	_, err = http.Get("http://" + httpAddr + "/healthz")
	assert.Error(t, err, "no longer taking requests")
}

type devNull struct{}

func (devNull) Write(p []byte) (int, error) { return len(p), nil }
