package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"path/filepath"
	"time"

	"github.com/payguard/payguard/api/httpapi"
	"github.com/payguard/payguard/chaos/stack"
	"github.com/payguard/payguard/codec"
	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/internal/process"
	"github.com/payguard/payguard/workflows"
)

// apiGrace is how long the API has to stop cleanly.
const apiGrace = 10 * time.Second

// apiServer is the order API (the api binary of --bin) on the bench's
// stack: its own process, as the worker and pgsim are, so that its CPU is
// its own and not the load client's. It shares the worker's Temporal, task
// queue, database and codec keys, and requires a bearer token, as it does
// beyond loopback.
type apiServer struct {
	URL   string
	token string
	proc  *process.Process
	// place is httpapi.Placer on a client that keeps its connections, as a
	// checkout backend's would.
	place func(context.Context, workflows.PaymentInput) error
}

func startAPI(ctx context.Context, o Options, st *stack.Stack) (*apiServer, error) {
	addr, err := process.FreeAddr()
	if err != nil {
		return nil, err
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	a := &apiServer{URL: "http://" + addr, token: hex.EncodeToString(b)}
	a.proc = &process.Process{Name: "api", Path: filepath.Join(o.Bin, "api"), LogDir: o.Out,
		Args: []string{"--http-addr", addr},
		Env: []string{"TEMPORAL_ADDRESS=" + st.Temporal.Addr, "TEMPORAL_NAMESPACE=" + config.DefaultNamespace,
			"TASK_QUEUE=" + config.DefaultTaskQueue, "DATABASE_URL=" + st.DBURL,
			codec.KeysEnv + "=" + st.Temporal.CodecKeys, httpapi.TokenEnv + "=" + a.token}}
	if err := a.proc.Start(); err != nil {
		return nil, err
	}
	if err := a.proc.WaitFor(ctx, 60*time.Second, "health", process.HTTPOK(a.URL+httpapi.HealthPath)); err != nil {
		_ = a.proc.Stop(apiGrace)
		return nil, err
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}}
	a.place = httpapi.Placer(a.URL, a.token, hc)
	return a, nil
}

// CPUTime is the API process's CPU time so far.
func (a *apiServer) CPUTime() time.Duration { return a.proc.CPUTime() }

func (a *apiServer) Stop() { _ = a.proc.Stop(apiGrace) }
