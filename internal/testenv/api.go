package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/payguard/payguard/api/httpapi"
)

// StartAPI starts the HTTP order API on the stack (its Temporal, task
// queue, database and codec keys) on a loopback port of its own; tune
// adjusts its configuration. It is stopped when the test ends.
func (s *Stack) StartAPI(t testing.TB, tune func(*httpapi.Config)) *httpapi.Server {
	t.Helper()
	cfg := httpapi.Config{Common: s.Config.Common, FirstAnswerWait: httpapi.DefaultFirstAnswerWait}
	l := Listen(t)
	cfg.Listener, cfg.HTTPAddr = l, l.Addr().String()
	if tune != nil {
		tune(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	api, err := httpapi.Start(ctx, cfg, Logger(t))
	if err != nil {
		t.Fatalf("start the API: %v", err)
	}
	t.Cleanup(func() { _ = api.Stop() })
	return api
}
