package service_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/worker/service"
)

func TestSlowClientsCannotHoldWorkerConnections(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, testenv.Processing(time.Hour), func(c *service.Config) { c.HTTPTimeouts = testenv.FastHTTPTimeouts() })
	t.Run("trickled callback body", func(t *testing.T) {
		took := testenv.TrickleBody(t, http.MethodPost, s.Config.CallbackURL, 20*time.Millisecond, 5*time.Second)
		assert.Greater(t, took, testenv.FastHTTPTimeouts().Read/2, "it waited for the body, then gave up")
	})
	t.Run("idle connection", func(t *testing.T) {
		took := testenv.IdleAfterOneRequest(t, s.MetricsURL(), 5*time.Second)
		assert.Greater(t, took, testenv.FastHTTPTimeouts().Idle/2, "it kept the connection a while")
	})
}
