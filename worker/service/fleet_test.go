package service_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/codec"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/starter/cli"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	metricnames "github.com/payguard/payguard/worker/metrics"
)

// Three worker processes on one task queue and one database, the gateway's
// lookups failing: the fleet's lookup breaker trips once — one trip's worth
// of lookups reach the dead gateway, not one per worker — every worker sees
// it open within a second of the first, and recovery closes it in all
// three; the orders then confirm.
func TestThreeWorkersShareOneLookupBreaker(t *testing.T) {
	t.Parallel()
	f := testenv.QuietFaults()
	sim := testenv.Pgsim(t, f)
	const minCalls = 5
	env, addrs := startWorkers(t, sim.GatewayURL(), "--poll-initial", "200ms", "--poll-max", "500ms",
		"--breaker-min-calls", fmt.Sprint(minCalls), "--breaker-open", "2s", "--breaker-half-open-calls", "3", "--breaker-scope", "fleet")
	dbURL := env["DATABASE_URL"]

	ctx := context.Background()
	st, err := store.Open(ctx, dbURL)
	require.NoError(t, err)
	defer st.Close()
	_, err = st.SetStock(ctx, "P1", 100)
	require.NoError(t, err)
	// Callbacks are lost so that only lookups can answer.
	testenv.PatchFaults(t, sim, map[string]any{"callback": map[string]any{"dropRate": 1}})
	getenv := func(k string) string { return env[k] }
	orders := []string{"fleet-1", "fleet-2", "fleet-3", "fleet-4", "fleet-5", "fleet-6"}
	testenv.PatchFaults(t, sim, map[string]any{"lookup": map[string]any{"errorRate": 1, "errorStatus": 503}})
	before := sim.Stats().Requests["lookup"]
	for _, id := range orders {
		require.NoError(t, cli.Run(ctx, []string{"order", "--product", "P1", "--qty", "1", "--amount", "5000", "--order-id", id},
			cli.Env{Getenv: getenv, Stdout: devNull{}, Stderr: devNull{}}))
	}

	var mu sync.Mutex
	openAt := map[string]time.Time{}
	testenv.Eventually(t, 60*time.Second, func() bool {
		for _, addr := range addrs {
			if lookupBreaker(t, addr) == 2 {
				mu.Lock()
				if _, ok := openAt[addr]; !ok {
					openAt[addr] = time.Now()
				}
				mu.Unlock()
			}
		}
		return len(openAt) == len(addrs)
	}, "every worker reports the lookup breaker open")
	first, last := time.Time{}, time.Time{}
	for _, at := range openAt {
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	assert.LessOrEqual(t, last.Sub(first), time.Second, "the trip reached every worker within a second")
	assert.LessOrEqual(t, sim.Stats().Requests["lookup"]-before, minCalls, "one trip's worth of lookups reached the dead gateway")

	testenv.PatchFaults(t, sim, map[string]any{"lookup": map[string]any{"errorRate": 0}})
	testenv.Eventually(t, 60*time.Second, func() bool {
		for _, id := range orders {
			o, err := st.GetOrder(ctx, id)
			if err != nil || o.Status != status.OrderConfirmed {
				return false
			}
		}
		return true
	}, "every order confirmed by a lookup after the recovery")
	for _, addr := range addrs {
		assert.Equal(t, 0.0, lookupBreaker(t, addr), "worker %s sees the breaker closed", addr)
	}
	for _, id := range orders {
		assert.Equal(t, 1, sim.Stats().Orders[id].CreateRequests, "order %s: one create", id)
	}
}

// lookupBreaker is the lookup breaker's state as the worker at addr sees it.
func lookupBreaker(t *testing.T, addr string) float64 {
	return breakerState(t, addr, activities.LookupBreakerName)
}

// breakerState is a breaker's state as the worker at addr sees it (0
// closed, 1 half-open, 2 open; -1 not scraped).
func breakerState(t *testing.T, addr, name string) float64 {
	t.Helper()
	samples, err := metricnames.Scrape(context.Background(), "http://"+addr+"/metrics", metricnames.BreakerState)
	if err != nil {
		return -1
	}
	for _, s := range samples {
		if s.Labels["breaker"] == name {
			return s.Value
		}
	}
	return -1
}

// startWorkers starts three worker processes (the real binary) on one new
// task queue and database, against gatewayURL, each with args, and waits
// until all are healthy. env is their environment; callbacks go to the
// first. They are killed at the test's end.
func startWorkers(t *testing.T, gatewayURL string, args ...string) (env map[string]string, addrs []string) {
	t.Helper()
	binary := testenv.BuildBinary(t, "./worker")
	addrs = make([]string, 3)
	for i := range addrs {
		addrs[i] = testenv.FreeAddr(t)
	}
	env = map[string]string{
		"TEMPORAL_ADDRESS": testenv.TemporalAddress(t), "TASK_QUEUE": testenv.ID("fleet"), "DATABASE_URL": testenv.NewDatabase(t),
		"GATEWAY_URL": gatewayURL, "GATEWAY_SECRET": testenv.Secret, "CALLBACK_URL": "http://" + addrs[0] + "/callbacks/gateway",
		codec.KeysEnv: testenv.CodecKeys(),
	}
	for i, addr := range addrs {
		cmd := exec.Command(binary, append([]string{"--http-addr", addr}, args...)...)
		cmd.Env = os.Environ()
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		if os.Getenv("PAYGUARD_TEST_LOG") == "1" {
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		}
		require.NoError(t, cmd.Start(), "worker %d", i)
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	for _, addr := range addrs {
		testenv.Eventually(t, 60*time.Second, func() bool {
			resp, err := http.Get("http://" + addr + "/healthz")
			if err == nil {
				resp.Body.Close()
			}
			return err == nil && resp.StatusCode == 200
		}, "worker healthy")
	}
	return env, addrs
}
