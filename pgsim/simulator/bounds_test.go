package simulator_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
)

// patchRaw sends a raw PATCH /admin/faults with a client that gives up, so a
// wedged simulator fails the test instead of hanging it.
func patchRaw(t *testing.T, client *http.Client, s *simulator.Server, body string) (int, failure) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPatch, s.AdminURL()+"/admin/faults", strings.NewReader(body))
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err, "the admin API answers")
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out struct{ Meta gateway.Meta }
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, failure{Code: deref(out.Meta.ErrorCode), Message: deref(out.Meta.Message)}
}

// failure is an error answer's meta, nulls as "".
type failure struct{ Code, Message string }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// The reproduction: the largest Go duration as the latency made the
// next request panic while holding the fault lock, so every later request
// and Close hung.
func TestAdminRefusesAnOverflowingLatencyAndKeepsServing(t *testing.T) {
	// Not testenv.Pgsim: its cleanup would wait forever on a wedged lock,
	// where this test must fail instead.
	s := simulator.New(simulator.Config{Addr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", Secret: []byte(testenv.Secret),
		Faults: testenv.QuietFaults(), Logger: testenv.Logger(t)})
	require.NoError(t, s.Start())
	client := &http.Client{Timeout: 5 * time.Second}
	before := s.Faults()

	code, answer := patchRaw(t, client, s, `{"latency":{"max":"2562047h47m16.854775807s"}}`)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, "BAD_REQUEST", answer.Code)
	assert.Contains(t, answer.Message, "latency.max", "the message names the field")
	assert.Contains(t, answer.Message, simulator.MaxAnswerDelay.String(), "and the bound")

	for _, path := range []string{"/api/v1/payments?orderId=order-1", "/api/v1/payments/nope"} {
		resp, err := client.Get(s.GatewayURL() + path)
		require.NoError(t, err, "the gateway still answers %s", path)
		resp.Body.Close()
		assert.Less(t, resp.StatusCode, 500, path)
	}
	resp, err := client.Get(s.AdminURL() + "/admin/faults")
	require.NoError(t, err, "the admin API still answers")
	resp.Body.Close()
	assert.Equal(t, before, s.Faults(), "the refused patch changed nothing")

	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10s")
	}
}

func TestAdminBoundsEveryDurationAndRate(t *testing.T) {
	s := testenv.Pgsim(t, testenv.QuietFaults())
	client := &http.Client{Timeout: 5 * time.Second}
	answer := simulator.MaxAnswerDelay.String()
	decision := simulator.MaxDecisionDelay.String()
	for _, c := range []struct{ body, field, bound string }{
		{`{"latency":{"min":"2562047h47m16.854775807s","max":"2562047h47m16.854775807s"}}`, "latency.min", answer},
		{`{"latency":{"max":1e300}}`, "latency.max", answer}, // milliseconds past any duration
		{`{"latency":{"max":-1e300}}`, "latency.max", answer},
		{`{"create":{"timeoutDelay":"2h"}}`, "create.timeoutDelay", answer},
		{`{"lookup":{"timeoutDelay":"2h"}}`, "lookup.timeoutDelay", answer},
		{`{"cancel":{"timeoutDelay":"-1s"}}`, "cancel.timeoutDelay", answer},
		{`{"processing":{"min":"9999h","max":"9999h"}}`, "processing.min", decision},
		{`{"processing":{"max":"2562047h47m16.854775807s"}}`, "processing.max", decision},
		{`{"callback":{"delay":"9999h"}}`, "callback.delay", decision},
		{`{"create":{"errorRate":1.5}}`, "create.errorRate", "0..1"},
		{`{"lookup":{"timeoutRate":-0.1}}`, "lookup.timeoutRate", "0..1"},
		{`{"processing":{"successRate":2}}`, "processing.successRate", "0..1"},
		{`{"callback":{"dropRate":7}}`, "callback.dropRate", "0..1"},
		{`{"callback":{"duplicateRate":1.01}}`, "callback.duplicateRate", "0..1"},
		{`{"cancel":{"failNext":-1}}`, "cancel.failNext", "negative"},
		{`{"lookup":{"errorStatus":200}}`, "lookup.errorStatus", "400..599"},
	} {
		code, out := patchRaw(t, client, s, c.body)
		assert.Equal(t, http.StatusBadRequest, code, c.body)
		assert.Equal(t, "BAD_REQUEST", out.Code, c.body)
		assert.Contains(t, out.Message, c.field, c.body)
		assert.Contains(t, out.Message, c.bound, c.body)
	}
	assert.Equal(t, testenv.QuietFaults(), s.Faults(), "refused patches change nothing")

	// The bounds themselves are legal, and the gateway answers at once with
	// them in force as long as no answer is actually held.
	code, _ := patchRaw(t, client, s, `{"latency":{"min":0,"max":0},"create":{"timeoutDelay":"`+answer+`"},"processing":{"min":"`+decision+`","max":"`+decision+`"},"callback":{"delay":"`+decision+`"}}`)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, http.StatusOK, create(t, s, "order-1", "", "http://127.0.0.1:1/cb").status)
}

func TestFlagsAreHeldToTheSameBounds(t *testing.T) {
	for _, args := range [][]string{
		{"--latency-max", "2562047h47m16.854775807s"},
		{"--create-timeout-delay", "2h"},
		{"--processing-max", "9999h"},
		{"--callback-delay", "1e300"},
		{"--success-rate", "NaN"},
	} {
		_, err := simulator.ParseFlags(args, func(string) string { return "" }, io.Discard)
		assert.Error(t, err, "%v", args)
	}
}
