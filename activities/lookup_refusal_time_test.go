package activities_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/gateway"
)

// A lookup by order id whose search the gateway answers (slowly: 200 ms)
// while the breaker trips on other calls: its read by key is then refused
// by the open breaker. 776078e made each read a breaker call of its own,
// and the refusal was timed from the start of the whole lookup: the
// search's 200 ms at the gateway went into
// payguard_breaker_refusal_duration_seconds (and a gateway call counted
// breaker_open), which #28 holds to 1 ms p99 in the demo's report. A
// refusal is timed from the refused call.
func TestARefusedReadOfALookupByOrderIsTimedFromItsOwnCall(t *testing.T) {
	r := newRig(t, quiet(), activities.DefaultBreakerSettings(), false)
	r.reserve(t, "order-1")
	r.requestAccepted(t, "order-1")
	sim, err := url.Parse(r.sim.GatewayURL())
	require.NoError(t, err)
	forward := httputil.NewSingleHostReverseProxy(sim)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/api/v1/payments" && req.URL.Query().Get("orderId") != "" {
			// Other calls fail meanwhile: the breaker trips.
			for range 3 {
				_ = r.breaker.Do(func() error { return errors.New("gateway down for the others") })
			}
			time.Sleep(200 * time.Millisecond) // a slow gateway's answer, not a wait for a condition
		}
		forward.ServeHTTP(w, req)
	}))
	t.Cleanup(proxy.Close)
	client, err := gateway.New(gateway.Config{BaseURL: proxy.URL, ConnectTimeout: time.Second, ReadTimeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(client.Close)
	acts := activities.New(r.store, client, r.breaker, activities.Config{CallbackURL: "http://127.0.0.1:1/callbacks/gateway"}, observer{r})
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(acts)

	_, err = env.ExecuteActivity(acts.LookupPayment, activities.LookupInput{OrderID: "order-1", UserID: "u1"})
	typ, _ := appError(t, err)
	require.Equal(t, activities.ErrLookupUnavailable, typ, "the read by key is refused by the open breaker")
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Len(t, r.refusal, 1)
	assert.Less(t, r.refusal[0], 50*time.Millisecond,
		"a refusal answers from memory: the search's time at the gateway is not the refusal's")
}
