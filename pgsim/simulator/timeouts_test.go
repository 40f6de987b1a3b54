package simulator_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
)

// fastPgsim starts pgsim with server timeouts short enough to watch fire.
func fastPgsim(t *testing.T, faults simulator.Faults) *simulator.Server {
	t.Helper()
	s := simulator.New(simulator.Config{Addr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", Secret: []byte(testenv.Secret),
		Faults: faults, Logger: testenv.Logger(t), HTTPTimeouts: testenv.FastHTTPTimeouts()})
	require.NoError(t, s.Start())
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestSlowClientsCannotHoldPgsimConnections(t *testing.T) {
	s := fastPgsim(t, testenv.QuietFaults())
	for _, c := range []struct{ name, method, body, idle string }{
		{"gateway", http.MethodPost, s.GatewayURL() + "/api/v1/payments", s.GatewayURL() + "/api/v1/payments?orderId=order-1"},
		{"admin", http.MethodPatch, s.AdminURL() + "/admin/faults", s.AdminURL() + "/admin/faults"},
	} {
		t.Run(c.name+" trickled body", func(t *testing.T) {
			took := testenv.TrickleBody(t, c.method, c.body, 20*time.Millisecond, 5*time.Second)
			assert.Greater(t, took, testenv.FastHTTPTimeouts().Read/2, "it waited for the body, then gave up")
		})
		t.Run(c.name+" idle connection", func(t *testing.T) {
			took := testenv.IdleAfterOneRequest(t, c.idle, 5*time.Second)
			assert.Greater(t, took, testenv.FastHTTPTimeouts().Idle/2, "it kept the connection a while")
		})
	}
	assert.Empty(t, s.Stats().Orders, "no trickled create was taken")
}

// A held answer (latency, then a timeout fault) is written only when the
// hold ends, so the gateway's write timeout must outlast the longest legal
// hold, whatever the base write timeout.
func TestHeldAnswersOutlastTheWriteTimeout(t *testing.T) {
	f := testenv.QuietFaults()
	f.Latency = simulator.Range{Min: simulator.Duration(200 * time.Millisecond), Max: simulator.Duration(200 * time.Millisecond)}
	f.Lookup.TimeoutRate, f.Lookup.TimeoutDelay = 1, simulator.Duration(600*time.Millisecond)
	s := fastPgsim(t, f)
	require.Greater(t, 800*time.Millisecond, testenv.FastHTTPTimeouts().Write, "the hold outlasts the base write timeout")
	client := &http.Client{Timeout: 5 * time.Second}
	start := time.Now()
	resp, err := client.Get(s.GatewayURL() + "/api/v1/payments?orderId=order-1")
	require.NoError(t, err, "the held answer arrives")
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.GreaterOrEqual(t, time.Since(start), 800*time.Millisecond)
}
