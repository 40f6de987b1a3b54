package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/chaos/check"
	"github.com/payguard/payguard/chaos/stack"
	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/workflows"
)

// Forged callback kinds: each must be refused with a 4xx.
const (
	ForgedBadSignature = "bad-signature"
	ForgedStale        = "stale"
	ForgedMalformed    = "malformed"
	ForgedUnknownOrder = check.KindUnknownOrder
)

// traffic is what an operator and an attacker add to the load: cancels of
// orders in flight and callbacks that are not the gateway's.
type traffic struct {
	st      *stack.Stack
	cl      client.Client
	secret  []byte
	rng     *rand.Rand
	orderID func(i int) string // the load's i-th order id (0-based)
	placed  func() int         // how many orders the load has placed so far

	mu       sync.Mutex
	cancels  []string
	forged   []check.Forged
	forgedNo int
}

// run sends one cancel or forged callback every interval until ctx ends.
func (t *traffic) run(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		placed := t.placed()
		if placed == 0 {
			continue
		}
		// The last few orders placed: most are still in flight, where a
		// cancel or a forged callback can do harm.
		recent := min(placed, 8)
		id := t.orderID(placed - 1 - t.rng.IntN(recent))
		if n%3 == 0 {
			t.cancel(ctx, id)
		} else {
			t.forge(ctx, id, []string{ForgedBadSignature, ForgedStale, ForgedMalformed, ForgedUnknownOrder}[t.rng.IntN(4)])
		}
	}
}

// cancel is an operator's cancel; an order already ended refuses it, which
// is fine: the books must be right either way.
func (t *traffic) cancel(ctx context.Context, orderID string) {
	ctx, done := context.WithTimeout(ctx, 5*time.Second)
	defer done()
	if err := t.cl.CancelWorkflow(ctx, workflows.PaymentWorkflowID(orderID), ""); err == nil {
		t.mu.Lock()
		t.cancels = append(t.cancels, orderID)
		t.mu.Unlock()
	}
}

// forge sends a callback that a worker must refuse, directly to a running
// worker (not through a fault proxy: its answer is what is being judged).
func (t *traffic) forge(ctx context.Context, orderID, kind string) {
	t.mu.Lock()
	t.forgedNo++
	key := fmt.Sprintf("forged-%d", t.forgedNo)
	t.mu.Unlock()
	cb := gateway.Transaction{TransactionKey: key, OrderID: orderID, Amount: 1, Status: gateway.StatusSuccess}
	if kind == ForgedUnknownOrder {
		cb.OrderID = "chaos-unknown-" + key
	}
	body, _ := json.Marshal(cb)
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	sig := gateway.Sign(t.secret, ts, body)
	switch kind {
	case ForgedBadSignature:
		sig = gateway.Sign([]byte("not-the-secret"), ts, body)
	case ForgedStale:
		ts = strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10)
		sig = gateway.Sign(t.secret, ts, body)
	case ForgedMalformed:
		body = append(body[:len(body)-1], []byte(`,"extra":true}`)...)
		sig = gateway.Sign(t.secret, ts, body)
	}
	f := check.Forged{Kind: kind, OrderID: cb.OrderID, TransactionKey: key}
	var w *stack.Worker
	for _, c := range t.st.Workers {
		if c.Running() {
			w = c
			break
		}
	}
	if w != nil {
		f.Code = post(ctx, w.CallbackURL(), body, ts, sig)
	}
	t.mu.Lock()
	t.forged = append(t.forged, f)
	t.mu.Unlock()
}

// post sends a callback and returns the HTTP status (0 when none came).
func post(ctx context.Context, url string, body []byte, ts, sig string) int {
	ctx, done := context.WithTimeout(ctx, 10*time.Second)
	defer done()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(gateway.HeaderTimestamp, ts)
	req.Header.Set(gateway.HeaderSignature, sig)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	// Read to the end, so the connection is reused for the next callback.
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
