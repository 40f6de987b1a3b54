package simulator_test

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/pgsim/simulator"
)

func TestParseFlagsDefaultsFollowTheSpec(t *testing.T) {
	cfg, err := simulator.ParseFlags(nil, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:8090", cfg.Addr)
	assert.Equal(t, "127.0.0.1:8091", cfg.AdminAddr)
	assert.True(t, cfg.Idempotency)
	assert.Equal(t, 15*24*time.Hour, cfg.IdempotencyTTL)
	assert.Equal(t, []byte(gateway.DevSecret), cfg.Secret)
	assert.Equal(t, simulator.DefaultFaults(), cfg.Faults)
	assert.Equal(t, 0.4, cfg.Faults.Create.ErrorRate)
	assert.Equal(t, 0.7, cfg.Faults.Processing.SuccessRate)
}

func TestParseFlagsReadsEveryFault(t *testing.T) {
	env := map[string]string{"GATEWAY_SECRET": "from-env"}
	cfg, err := simulator.ParseFlags([]string{"--addr", "127.0.0.1:9000", "--seed", "7", "--idempotency=false",
		"--create-error-rate", "0", "--create-created-then-500-rate", "0.3", "--lookup-fail-next", "10", "--lookup-error-status", "503", "--cancel-timeout-rate", "0.5",
		"--latency-min", "0", "--latency-max", "20ms", "--processing-min", "1s", "--processing-max", "2s", "--success-rate", "1",
		"--callback-drop-rate", "0.1", "--callback-delay", "50ms", "--callback-duplicate-rate", "0.2", "--down"},
		func(k string) string { return env[k] }, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:9000", cfg.Addr)
	assert.Equal(t, uint64(7), cfg.Seed)
	assert.False(t, cfg.Idempotency)
	assert.Equal(t, []byte("from-env"), cfg.Secret)
	f := cfg.Faults
	assert.Zero(t, f.Create.ErrorRate)
	assert.Equal(t, 0.3, f.Create.CreatedThen500Rate)
	assert.Equal(t, 10, f.Lookup.FailNext)
	assert.Equal(t, 503, f.Lookup.ErrorStatus)
	assert.Equal(t, 0.5, f.Cancel.TimeoutRate)
	assert.Equal(t, simulator.Duration(20*time.Millisecond), f.Latency.Max)
	assert.Equal(t, simulator.Processing{Min: simulator.Duration(time.Second), Max: simulator.Duration(2 * time.Second), SuccessRate: 1}, f.Processing)
	assert.Equal(t, simulator.CallbackFaults{DropRate: 0.1, Delay: simulator.Duration(50 * time.Millisecond), DuplicateRate: 0.2}, f.Callback)
	assert.True(t, f.Down)
}

func TestParseFlagsRejectsBadValues(t *testing.T) {
	for _, args := range [][]string{
		{"--create-error-rate", "1.5"},
		{"--create-created-then-500-rate", "-0.1"},
		{"--latency-min", "2s", "--latency-max", "1s"},
		{"--lookup-error-status", "200"},
		{"--callback-delay", "soon"},
		{"extra"},
	} {
		_, err := simulator.ParseFlags(args, func(string) string { return "" }, io.Discard)
		assert.Error(t, err, "%v", args)
	}
}
