package service_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/worker/service"
)

// The worker process on the real stack: its health, and its start while
// Temporal cannot be reached.

func TestHealthz(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, testenv.Processing(time.Hour), nil)
	resp, err := http.Get("http://" + s.Worker.Addr() + "/healthz")
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	var body map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	assert.Equal(t, "ok", body["status"])
}

func TestWorkerWaitsForTemporalWithAClearMessage(t *testing.T) {
	t.Parallel()
	cfg := testenv.FastConfig()
	cfg.TemporalAddress = testenv.FreeAddr(t) // nobody listens
	cfg.Namespace, cfg.TaskQueue = "default", "payments"
	cfg.DatabaseURL = testenv.NewDatabase(t)
	cfg.GatewayURL, cfg.CallbackURL, cfg.GatewaySecret = "http://127.0.0.1:1", "http://127.0.0.1:1/cb", "s"
	cfg.HTTPAddr = "127.0.0.1:0"
	var logs strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := service.Start(ctx, cfg, slog.New(slog.NewJSONHandler(&lockedWriter{w: &logs}, nil)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "temporal not reachable at "+cfg.TemporalAddress)
	assert.Contains(t, logs.String(), `"msg":"waiting for Temporal"`, "it said what it was waiting for, more than once")
	assert.GreaterOrEqual(t, strings.Count(logs.String(), "waiting for Temporal"), 2)
}

// lockedWriter lets the logger and the test share a buffer safely.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
