package simulator_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
)

// Callbacks: signed, retried, dropped, duplicated and delayed.

func TestCallbacksAreSignedAndRetried(t *testing.T) {
	s := testenv.Pgsim(t, testenv.QuietFaults())
	sink := newSink(t)
	sink.status.Store(503)
	created := create(t, s, "order-1", "", sink.srv.URL)
	require.Equal(t, 200, created.status)
	testenv.Eventually(t, 5*time.Second, func() bool { return sink.tries.Load() >= 2 }, "two refused tries")
	assert.Empty(t, sink.received())
	sink.status.Store(200)
	testenv.Eventually(t, 10*time.Second, func() bool { return len(sink.received()) == 1 }, "callback delivered after retries")
	got := sink.received()[0]
	assert.Equal(t, created.body["transactionKey"], got.TransactionKey)
	assert.Equal(t, "SUCCESS", got.Status)
	assert.EqualValues(t, 5000, got.Amount)
}

func TestResolveWithoutCallbackSendsNone(t *testing.T) {
	s := testenv.Pgsim(t, slowProcessing())
	sink := newSink(t)
	silent := create(t, s, "order-1", "", sink.srv.URL).body["transactionKey"].(string)
	loud := create(t, s, "order-2", "", sink.srv.URL).body["transactionKey"].(string)
	testenv.Admin(t, s, "POST", "/admin/transactions/"+silent+"/resolve", map[string]any{"status": "SUCCESS", "callback": false}, nil)
	testenv.Admin(t, s, "POST", "/admin/transactions/"+loud+"/resolve", map[string]any{"status": "FAILED", "reason": "LIMIT_EXCEEDED"}, nil)
	testenv.Eventually(t, 5*time.Second, func() bool { return len(sink.received()) == 1 }, "the callback of the loud resolve")
	// The loud callback came through the same sender; the silent one would have been queued first.
	assert.Equal(t, loud, sink.received()[0].TransactionKey)
	assert.Equal(t, "LIMIT_EXCEEDED", sink.received()[0].Reason)
	got := do(t, http.MethodGet, s.GatewayURL()+"/api/v1/payments/"+silent, nil, "")
	assert.Equal(t, "SUCCESS", got.body["status"])
	assert.Equal(t, 1, s.Stats().Orders["order-1"].Successful)

	assert.Equal(t, 400, testenv.Admin(t, s, "POST", "/admin/transactions/"+silent+"/resolve", map[string]any{"status": "MAYBE"}, nil))
	assert.Equal(t, 404, testenv.Admin(t, s, "POST", "/admin/transactions/nope/resolve", map[string]any{"status": "SUCCESS"}, nil))
}

func TestDroppedCallbackIsStillVisibleByLookup(t *testing.T) {
	f := testenv.QuietFaults()
	f.Callback.DropRate = 1
	s := testenv.Pgsim(t, f)
	sink := newSink(t)
	key := create(t, s, "order-1", "", sink.srv.URL).body["transactionKey"].(string)
	testenv.Eventually(t, 5*time.Second, func() bool {
		return do(t, http.MethodGet, s.GatewayURL()+"/api/v1/payments/"+key, nil, "").body["status"] == "SUCCESS"
	}, "processed")
	// Give a would-be callback the same chance a delivered one had.
	other := newSink(t)
	testenv.PatchFaults(t, s, map[string]any{"callback": map[string]any{"dropRate": 0}})
	create(t, s, "order-2", "", other.srv.URL)
	testenv.Eventually(t, 5*time.Second, func() bool { return len(other.received()) == 1 }, "control callback")
	assert.Empty(t, sink.received())
}

func TestDuplicateAndDelayedCallbacks(t *testing.T) {
	f := testenv.QuietFaults()
	f.Callback.DuplicateRate = 1
	f.Callback.Delay = simulator.Duration(300 * time.Millisecond)
	s := testenv.Pgsim(t, f)
	sink := newSink(t)
	start := time.Now()
	create(t, s, "order-1", "", sink.srv.URL)
	testenv.Eventually(t, 5*time.Second, func() bool { return len(sink.received()) == 2 }, "two copies")
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	assert.Equal(t, sink.received()[0], sink.received()[1])
}

// Callbacks to one receiver reuse one connection: each answer is read to
// its end before the next callback goes, so the connection can serve it.
// Unread, every callback opened a connection of its own (one per order in
// `make bench`, 800 sockets in TIME_WAIT after a 20 s step at 40/s).
func TestCallbacksReuseTheirConnection(t *testing.T) {
	s := testenv.Pgsim(t, testenv.QuietFaults())
	sink := newSink(t)
	const orders = 6
	for i := range orders {
		create(t, s, fmt.Sprintf("order-%d", i), "", sink.srv.URL)
		testenv.Eventually(t, 5*time.Second, func() bool { return len(sink.received()) == i+1 }, fmt.Sprintf("callback %d", i))
	}
	assert.LessOrEqual(t, sink.conns.Load(), int32(2), "%d callbacks, one after the other", orders)
}
