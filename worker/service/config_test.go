package service_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/codec"
	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/worker/service"
	"github.com/payguard/payguard/workflows"
)

func TestWorkerFlagDefaultsFollowTheSpec(t *testing.T) {
	c, err := service.ParseFlags(nil, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "payments", c.TaskQueue)
	assert.Equal(t, "postgres://postgres@127.0.0.1:5432/payguard?sslmode=disable", c.DatabaseURL)
	assert.Equal(t, "http://127.0.0.1:8090", c.GatewayURL)
	assert.Equal(t, gateway.DevSecret, c.GatewaySecret)
	assert.Equal(t, "http://127.0.0.1:8081/callbacks/gateway", c.CallbackURL)
	assert.Equal(t, codec.DevKeyFile, c.CodecKeyFile)
	assert.Equal(t, []string{"http://127.0.0.1:8233", "http://localhost:8233"}, c.CodecOrigins)
	assert.Empty(t, c.CodecToken)
	c.CodecKeys = testenv.CodecKeys()
	opts, err := c.ClientOptions(testenv.Logger(t))
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:7233", opts.HostPort, "no flag, environment or profile: the local dev server")
	assert.Equal(t, "default", opts.Namespace)
	assert.Nil(t, opts.ConnectionOptions.TLS)
	assert.Equal(t, "127.0.0.1:8081", c.HTTPAddr)
	assert.Equal(t, time.Second, c.ConnectTimeout)
	assert.Equal(t, 3*time.Second, c.ReadTimeout)
	assert.Equal(t, 0, c.RequestAttempts, "as many creates as the deadline allows")
	assert.False(t, c.IdempotencyKeys)
	assert.Equal(t, 10*time.Second, c.UnknownGrace)
	assert.Equal(t, 5*time.Second, c.PollInitial)
	assert.Equal(t, time.Minute, c.PollMax)
	assert.Equal(t, 10*time.Second, c.Breaker.Window)
	assert.EqualValues(t, 5, c.Breaker.MinCalls)
	assert.Equal(t, 0.5, c.Breaker.FailureRate)
	assert.Equal(t, 10*time.Second, c.Breaker.OpenFor)
	assert.EqualValues(t, 3, c.Breaker.HalfOpenCalls)
	assert.EqualValues(t, 3, c.Breaker.ConsecutiveFailures)
	assert.EqualValues(t, 3, c.RequestBreaker.ConsecutiveFailures, "three creates in a row without an answer: a dead gateway")
	assert.Equal(t, activities.DefaultRequestBreakerSettings(), c.RequestBreaker)
	assert.EqualValues(t, 1, c.RequestBreaker.HalfOpenCalls, "one good trial closes the request breaker")
	assert.Equal(t, service.CallbackAuthSigned, c.CallbackAuth)
	tuning := c.Tuning()
	assert.Greater(t, tuning.RequestTimeout, c.ConnectTimeout+c.ReadTimeout, "the HTTP timeout fires before the activity's")
	assert.Equal(t, workflows.DefaultTuning(), tuning, "DefaultTuning is what a worker with default flags passes")
}

func TestWorkerFlagsComeFromTheEnvironment(t *testing.T) {
	env := map[string]string{"TEMPORAL_ADDRESS": "10.0.0.1:7233", "TASK_QUEUE": "q", "DATABASE_URL": "postgres://u:pw@db/x",
		"GATEWAY_URL": "http://gw:1", "GATEWAY_SECRET": "s", "CALLBACK_URL": "http://me/cb", "TEMPORAL_NAMESPACE": "ns"}
	c, err := service.ParseFlags([]string{"--breaker-open", "2s", "--idempotency-keys"}, func(k string) string { return env[k] }, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "q", c.TaskQueue)
	env[codec.KeysEnv] = testenv.CodecKeys()
	c, err = service.ParseFlags([]string{"--breaker-open", "2s", "--idempotency-keys"}, func(k string) string { return env[k] }, io.Discard)
	require.NoError(t, err)
	opts, err := c.ClientOptions(testenv.Logger(t))
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.1:7233", opts.HostPort)
	assert.Equal(t, "ns", opts.Namespace)
	assert.Equal(t, "http://gw:1", c.GatewayURL)
	assert.Equal(t, 2*time.Second, c.Breaker.OpenFor)
	assert.Equal(t, activities.DefaultRequestBreakerSettings().OpenFor, c.RequestBreaker.OpenFor, "the lookup breaker's flags leave the request breaker alone")
	assert.True(t, c.IdempotencyKeys)
	attrs := c.LogAttrs()
	assert.Contains(t, attrs, "postgres://u:xxxxx@db/x", "password masked")
	assert.Contains(t, attrs, "****", "secret masked")
	assert.NotContains(t, attrs, "pw")
}

func TestWorkerFlagsRejectBadValues(t *testing.T) {
	for _, args := range [][]string{
		{"--request-attempts", "-1"},
		{"--breaker-failure-rate", "1.5"},
		{"--request-breaker-failure-rate", "0"},
		{"--request-breaker-half-open-calls", "0"},
		{"--request-breaker-open", "0s"},
		{"--breaker-consecutive-failures", "1"},
		{"--breaker-consecutive-failures", "-1"},
		{"--request-breaker-consecutive-failures", "4294967296"},
		// Beyond gobreaker's uint32 counts: once wrapped round to 1.
		{"--breaker-min-calls", "4294967297"},
		{"--poll-initial", "2m", "--poll-max", "1m"},
		{"--gateway-url", "gw:8090"},
		{"--database-url", "mysql://x"},
		{"--read-timeout", "0s"},
		{"--callback-auth", "none"},
		// A pace under one lookup a minute times every batch out (heartbeat
		// 1 min): the sweep would retry its first batch for ever.
		{"--reconcile-rate", "0.01"},
		{"--reconcile-rate", "-1"},
		// Orders that end between two sweeps would fall outside both.
		{"--reconcile-interval", "5m", "--reconcile-window", "1m"},
		{"--reconcile-interval", "13h"},
	} {
		_, err := service.ParseFlags(args, func(string) string { return "" }, io.Discard)
		assert.Error(t, err, "%v", args)
	}
}

// Each breaker's consecutive-failures rule is its own, and a bad value
// says what is wanted.
func TestWorkerConsecutiveFailuresFlags(t *testing.T) {
	none := func(string) string { return "" }
	c, err := service.ParseFlags([]string{"--breaker-consecutive-failures", "0", "--request-breaker-consecutive-failures", "6"}, none, io.Discard)
	require.NoError(t, err)
	assert.Zero(t, c.Breaker.ConsecutiveFailures)
	assert.EqualValues(t, 6, c.RequestBreaker.ConsecutiveFailures)
	assert.Equal(t, activities.DefaultRequestBreakerSettings().MinCalls, c.RequestBreaker.MinCalls)
	assert.Contains(t, c.LogAttrs(), "breaker_consecutive_failures")

	_, err = service.ParseFlags([]string{"--request-breaker-consecutive-failures", "1"}, none, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--request-breaker-consecutive-failures must be 0 (off) or at least 2")
	_, err = service.ParseFlags([]string{"--breaker-consecutive-failures", "three"}, none, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "breaker-consecutive-failures")
	assert.Contains(t, err.Error(), "whole number")
}

func TestWorkerCallbackAuthLookup(t *testing.T) {
	c, err := service.ParseFlags([]string{"--callback-auth", "lookup"}, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, service.CallbackAuthLookup, c.CallbackAuth)
	assert.Contains(t, c.LogAttrs(), service.CallbackAuthLookup)
}

// The development secret is public: a worker whose callback endpoint anyone
// else can reach must have a secret of its own.
func TestWorkerRefusesThePublicSecretBeyondLoopback(t *testing.T) {
	none := func(string) string { return "" }
	withSecret := func(k string) string {
		if k == "GATEWAY_SECRET" {
			return "a-secret-of-its-own"
		}
		return ""
	}
	for _, addr := range []string{"0.0.0.0:8081", ":8081", "[::]:8081", "10.1.2.3:8081", "worker:8081"} {
		_, err := service.ParseFlags([]string{"--http-addr", addr}, none, io.Discard)
		if assert.Error(t, err, "%s with GATEWAY_SECRET unset", addr) {
			assert.Contains(t, err.Error(), "GATEWAY_SECRET", "the message says what to set")
		}
		_, err = service.ParseFlags([]string{"--http-addr", addr, "--gateway-secret", gateway.DevSecret}, none, io.Discard)
		assert.Error(t, err, "%s with the development secret given explicitly", addr)
		_, err = service.ParseFlags([]string{"--http-addr", addr}, withSecret, io.Discard)
		assert.NoError(t, err, "%s with a secret of its own", addr)
	}
	for _, addr := range []string{"127.0.0.1:8081", "127.0.0.2:0", "[::1]:8081", "localhost:8081"} {
		_, err := service.ParseFlags([]string{"--http-addr", addr}, none, io.Discard)
		assert.NoError(t, err, "%s: the development secret stays usable on loopback", addr)
	}
}

// The real worker's main refuses before it connects to anything (the
// database and Temporal here are unreachable: had it gone on, it would have
// waited for them until the context ended).
func TestWorkerDoesNotStartWithThePublicSecretOnAnOpenAddress(t *testing.T) {
	env := map[string]string{"DATABASE_URL": "postgres://nobody@127.0.0.1:1/x?connect_timeout=1", "TEMPORAL_ADDRESS": testenv.FreeAddr(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	err := service.Run(ctx, []string{"--http-addr", "0.0.0.0:0"}, func(k string) string { return env[k] }, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "GATEWAY_SECRET")
	assert.Less(t, time.Since(start), 2*time.Second, "refused at once, not after waiting for the database")
}

// pgsim signs with what the worker verifies with: one source, one default.
func TestWorkerAndPgsimReadOneSecret(t *testing.T) {
	for _, env := range []map[string]string{{}, {"GATEWAY_SECRET": "shared"}} {
		getenv := func(k string) string { return env[k] }
		w, err := service.ParseFlags(nil, getenv, io.Discard)
		require.NoError(t, err)
		p, err := simulator.ParseFlags(nil, getenv, io.Discard)
		require.NoError(t, err)
		assert.Equal(t, w.GatewaySecret, string(p.Secret), "%v", env)
		assert.Equal(t, config.GatewaySecret(getenv), w.GatewaySecret)
	}
}

// The sweep's window must reach back over two intervals; with the schedule
// off (interval 0) any window goes, and the defaults pass.
func TestReconcileWindowCoversTwoIntervals(t *testing.T) {
	none := func(string) string { return "" }
	for _, ok := range [][]string{
		nil,
		{"--reconcile-interval", "10m", "--reconcile-window", "20m"},
		{"--reconcile-interval", "0", "--reconcile-window", "1m"},
		{"--reconcile-interval", "12h"},
	} {
		_, err := service.ParseFlags(ok, none, io.Discard)
		assert.NoError(t, err, "%v", ok)
	}
	_, err := service.ParseFlags([]string{"--reconcile-interval", "10m", "--reconcile-window", "19m"}, none, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--reconcile-window (19m0s) must be at least twice --reconcile-interval (10m0s)")
}
