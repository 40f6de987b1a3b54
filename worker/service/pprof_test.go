package service_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/worker/service"
)

// The profiler is served only with --pprof, on the worker's own port; a
// worker with a sized pool (--db-max-conns) starts like any other.
func TestPprofOnlyWithTheFlag(t *testing.T) {
	testenv.NeedsServices(t, "PostgreSQL and the Temporal dev server")
	for _, on := range []bool{false, true} {
		s := testenv.NewStack(t, simulator.DefaultFaults(), func(c *service.Config) { c.Pprof, c.DBMaxConns = on, 8 })
		resp, err := http.Get("http://" + s.Worker.Addr() + "/debug/pprof/goroutine?debug=1")
		require.NoError(t, err)
		resp.Body.Close()
		want := http.StatusNotFound
		if on {
			want = http.StatusOK
		}
		assert.Equal(t, want, resp.StatusCode, "--pprof=%t", on)
	}
}
