package gateway_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/gateway"
)

const rule = "must be 1–64 characters of A–Z a–z 0–9 . _ : -"

// acceptLog listens on a loopback port and reports every connection it
// accepts, in order, so a test can prove that none was ever opened.
type acceptLog struct {
	addr     string
	accepted chan string // remote address of each accepted connection
}

func newAcceptLog(t *testing.T) *acceptLog {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	a := &acceptLog{addr: l.Addr().String(), accepted: make(chan string, 100)}
	done := make(chan struct{})
	t.Cleanup(func() { l.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			a.accepted <- c.RemoteAddr().String()
			c.Close()
		}
	}()
	return a
}

// requireNoneBefore proves nothing connected before now: it connects a
// probe and requires the probe to be the first connection accepted. The
// kernel queues completed connections in order, so any connection the
// client had made would be accepted first — no sleeping and hoping.
func (a *acceptLog) requireNoneBefore(t *testing.T) {
	t.Helper()
	probe, err := net.Dial("tcp", a.addr)
	require.NoError(t, err)
	defer probe.Close()
	select {
	case first := <-a.accepted:
		require.Equal(t, probe.LocalAddr().String(), first, "a connection was opened before the probe")
	case <-time.After(10 * time.Second):
		t.Fatal("the probe was never accepted")
	}
}

// A CR in the user id cannot go into an HTTP header, so the request cannot
// be built: the client says so with its own class, ErrInvalidRequest — not
// ErrUnreachable, which would tell the caller the gateway is down and a
// retry is safe — and it opens no connection. Before, it was ErrUnreachable.
func TestCarriageReturnInUserIDIsAnInvalidRequestAndNeverConnects(t *testing.T) {
	gw := newAcceptLog(t)
	_, err := client(t, "http://"+gw.addr).CreatePayment(context.Background(), order, "u\r", "")
	requireClass(t, err, gateway.ErrInvalidRequest)
	assert.ErrorContains(t, err, `user id "u\r" `+rule)
	gw.requireNoneBefore(t)
}

// Every id outside the rule, and every header value HTTP cannot carry, is
// refused the same way before a connection is opened, by create and by the
// lookup by order id alike. A 200-character order id used to be sent (and
// refused by the gateway only after stock was held).
func TestRequestsWithIDsOutsideTheRuleAreRefusedBeforeConnecting(t *testing.T) {
	gw := newAcceptLog(t)
	c := client(t, "http://"+gw.addr)
	ctx := context.Background()
	with := func(orderID string) gateway.CreateRequest { o := order; o.OrderID = orderID; return o }
	calls := map[string]func() error{
		"create, 200-character order id": func() error { _, err := c.CreatePayment(ctx, with(strings.Repeat("o", 200)), "", ""); return err },
		"create, 65-character order id":  func() error { _, err := c.CreatePayment(ctx, with(strings.Repeat("o", 65)), "", ""); return err },
		"create, empty order id":         func() error { _, err := c.CreatePayment(ctx, with(""), "", ""); return err },
		"create, NUL in order id":        func() error { _, err := c.CreatePayment(ctx, with("o\x00"), "", ""); return err },
		"create, LF in user id":          func() error { _, err := c.CreatePayment(ctx, order, "u\n1", ""); return err },
		"create, NUL in user id":         func() error { _, err := c.CreatePayment(ctx, order, "u\x00", ""); return err },
		"create, 65-character user id":   func() error { _, err := c.CreatePayment(ctx, order, strings.Repeat("u", 65), ""); return err },
		"create, CRLF in key":            func() error { _, err := c.CreatePayment(ctx, order, "u1", "k\r\nX-Evil: 1"); return err },
		"lookup by order, NUL":           func() error { _, err := c.PaymentsByOrder(ctx, "o\x00"); return err },
		"lookup by order, 65 characters": func() error { _, err := c.PaymentsByOrder(ctx, strings.Repeat("o", 65)); return err },
		"lookup by order, empty":         func() error { _, err := c.PaymentsByOrder(ctx, ""); return err },
	}
	for name, call := range calls {
		err := call()
		requireClass(t, err, gateway.ErrInvalidRequest)
		var ge *gateway.Error
		require.ErrorAs(t, err, &ge, name)
		assert.Zero(t, ge.StatusCode, name)
	}
	gw.requireNoneBefore(t)
}

// The boundaries reach the gateway untouched: a 64-character order id and
// user id, and every allowed punctuation mark. 65 characters do not.
func TestIDBoundariesInTheGatewayClient(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req gateway.CreateRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		got = append(got, req.OrderID+" "+r.Header.Get("X-USER-ID"))
		mu.Unlock()
		_, _ = w.Write([]byte(`{"meta":{"result":"SUCCESS","errorCode":null,"message":null},"data":{"transactionKey":"T1","status":"PENDING","reason":null}}`))
	}))
	t.Cleanup(srv.Close)
	c := client(t, srv.URL)
	var want []string
	for _, id := range []string{strings.Repeat("a", 64), "order.1", "order_1", "order:1", "order-1", "a.b_c:d-e"} {
		o := order
		o.OrderID = id
		_, err := c.CreatePayment(context.Background(), o, id, "")
		require.NoError(t, err, id)
		want = append(want, id+" "+id)
	}
	mu.Lock()
	assert.Equal(t, want, got)
	mu.Unlock()
	o := order
	o.OrderID = strings.Repeat("a", 65)
	_, err := c.CreatePayment(context.Background(), o, "u1", "")
	requireClass(t, err, gateway.ErrInvalidRequest)
	mu.Lock()
	assert.Len(t, got, len(want), "the 65-character id was not sent")
	mu.Unlock()
}

// The client's default user id follows the rule too: a bad one is refused
// when the client is built, not on every call.
func TestNewRefusesADefaultUserIDOutsideTheRule(t *testing.T) {
	for _, u := range []string{"u\r", "a b", strings.Repeat("u", 65)} {
		_, err := gateway.New(gateway.Config{BaseURL: "http://127.0.0.1:8090", UserID: u})
		assert.ErrorContains(t, err, rule, "%q", u)
	}
}
