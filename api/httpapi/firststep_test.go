package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/api/httpapi"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
)

// metric reads one sample of the API's /metrics page (0 when absent).
func (c *client) metric(t *testing.T, sample string) float64 {
	t.Helper()
	resp, err := http.Get(c.base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`).FindStringSubmatch(readAll(t, resp))
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	return v
}

func firstAnswers(via string) string {
	return fmt.Sprintf(`%s{via=%q}`, httpapi.MetricFirstAnswers, via)
}

// A new order's first answer is learned from the notification its
// reservation's commit sends; when the listening connection drops, and
// while it stays down, first answers are read from the orders' rows
// instead: every order is answered with its stock reserved, none lost.
func TestTheFirstAnswerIsHeardAndReadWhenTheListenerIsDown(t *testing.T) {
	s, api, c := apiStack(t, 0, nil)
	s.SetStock(t, "P1", 10)
	testenv.Eventually(t, 10*time.Second, func() bool { return c.metric(t, httpapi.MetricListening) == 1 }, "the API listens")
	placed := func(id string) httpapi.OrderAnswer {
		t.Helper()
		r := c.do(http.MethodPost, "/api/v1/orders", order(id, "P1", 1, 700), customer, true)
		require.Equal(t, http.StatusCreated, r.code, "%s", r.body)
		var a httpapi.OrderAnswer
		r.decode(t, &a)
		assert.Equal(t, id, a.OrderID)
		assert.Contains(t, []status.Order{status.OrderRequesting, status.OrderPending}, a.Status, "reserved at the answer")
		return a
	}

	heard := placed("heard-0001")
	assert.Equal(t, httpapi.OrderAnswer{OrderID: "heard-0001", Status: status.OrderRequesting}, heard, "the step the reservation's commit announced")
	assert.Equal(t, 1.0, c.metric(t, firstAnswers(httpapi.ViaNotification)), "heard, not polled")
	assert.Zero(t, c.metric(t, firstAnswers(httpapi.ViaRead)))

	// The listening connection killed: the next order is answered all the
	// same, whether the listener is back by then or not.
	var killed int
	require.NoError(t, s.Store.Pool().QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = 'payguard-first-steps' AND datname = current_database()`).Scan(&killed))
	require.Equal(t, 1, killed, "one listening connection per API")
	placed("dropped-0001")

	// Down for good: read from the rows.
	api.StopListening()
	assert.Zero(t, c.metric(t, httpapi.MetricListening))
	placed("unheard-0001")
	assert.GreaterOrEqual(t, c.metric(t, firstAnswers(httpapi.ViaRead)), 1.0, "read from the row")
	assert.Zero(t, c.metric(t, firstAnswers(httpapi.ViaTimeout)))
	assert.Equal(t, int64(3), 10-s.Stock(t, "P1").Available, "every order's stock held")
}

// While the listener listens, a request whose order has not yet taken its
// first step (the worker down, or a backlog under overload) reads the row
// only now and then, in case a notification went astray, and less often
// the longer it waits: at the edge of capacity, when first steps slow
// down, reads every 100 ms by each waiting request would add load to the
// database the reservations need.
func TestAWaitingRequestReadsItsRowLessOftenTheLongerItWaits(t *testing.T) {
	wait := 2 * time.Second
	s, _, c := apiStack(t, 0, func(cfg *httpapi.Config) { cfg.FirstAnswerWait = wait })
	s.SetStock(t, "P1", 10)
	testenv.Eventually(t, 10*time.Second, func() bool { return c.metric(t, httpapi.MetricListening) == 1 }, "the API listens")
	// The worker is down: the order is started, and not reserved before the wait ends.
	require.NoError(t, s.Worker.Stop())

	r := c.do(http.MethodPost, "/api/v1/orders", order("slow-00001", "P1", 1, 700), customer, true)
	require.Equal(t, http.StatusCreated, r.code, "%s", r.body)
	var a httpapi.OrderAnswer
	r.decode(t, &a)
	assert.Equal(t, status.OrderReserving, a.Status, "not reserved within the wait")
	assert.Equal(t, 1.0, c.metric(t, firstAnswers(httpapi.ViaTimeout)))
	reads := c.metric(t, httpapi.MetricFirstStepReads)
	assert.GreaterOrEqual(t, reads, 1.0, "the row is read in case a notification went astray")
	assert.LessOrEqual(t, reads, 5.0, "a %s wait reads the row a few times, not every 100 ms", wait)
}
