package httpapi_test

// Holes an adversarial review of the HTTP order API found, each held shut
// on the real stack (PostgreSQL, the Temporal dev server, pgsim).

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/api/httpapi"
	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

// A brand-new Idempotency-Key never takes over an order already placed,
// even before that order's row is written (the worker down): customer B,
// sending customer A's order id under a key of its own, is answered 409
// ALREADY_PLACED, as without a key, and its replay says so again.
func TestAFreshKeyNeverTakesOverAnotherCustomersOrder(t *testing.T) {
	s, _, c := apiStack(t, time.Hour, func(cfg *httpapi.Config) { cfg.FirstAnswerWait = 300 * time.Millisecond })
	s.SetStock(t, "P1", 10)
	s.SetStock(t, "P2", 10)
	// The worker is down (a deploy, a crash): orders are started, not yet reserved.
	require.NoError(t, s.Worker.Stop())

	a := c.do(http.MethodPost, "/api/v1/orders", order("shared-0001", "P1", 1, 900), customer, true)
	require.Equal(t, http.StatusCreated, a.code, "customer A's order: %s", a.body)

	// Customer B, under a key of its own, sends an order id that is taken.
	other := map[string]string{httpapi.HeaderUser: "user-2", httpapi.HeaderIdempotencyKey: "b-checkout-1"}
	b := c.do(http.MethodPost, "/api/v1/orders", order("shared-0001", "P2", 5, 123456), other, true)
	t.Logf("customer B answered %d %s (Location %q)", b.code, strings.TrimSpace(string(b.body)), b.header.Get("Location"))

	// The worker comes back: the one order is A's.
	s.StartWorker(t, nil)
	var row store.Order
	testenv.Eventually(t, 30*time.Second, func() bool {
		var err error
		row, err = s.Store.GetOrder(context.Background(), "shared-0001")
		return err == nil && row.Status != status.OrderReserving
	}, "order shared-0001 reserved")
	assert.Equal(t, "user-1", row.UserID)
	assert.Equal(t, "P1", row.ProductID)
	assert.Equal(t, int64(10), s.Stock(t, "P2").Available, "nothing of B's order was reserved")

	assert.Equal(t, http.StatusConflict, b.code,
		"B's order was not placed: its id belongs to A's order, yet B was answered %d %s", b.code, b.body)
	again := c.do(http.MethodPost, "/api/v1/orders", order("shared-0001", "P2", 5, 123456), other, true)
	assert.NotEqual(t, http.StatusOK, again.code, "the replay under B's key keeps saying B's order is placed: %s", again.body)
}

// A customer's second request for an order id, under a new key and with
// another card and deadline, is a 409 ALREADY_PLACED: the order placed,
// and its charge, are on the first card.
func TestAFreshKeyNeverTakesOverAnOrderPlacedWithAnotherCard(t *testing.T) {
	s, _, c := apiStack(t, time.Hour, nil)
	s.SetStock(t, "P1", 10)
	first := c.do(http.MethodPost, "/api/v1/orders", order("card-00001", "P1", 1, 900), customer, true)
	require.Equal(t, http.StatusCreated, first.code, "%s", first.body)

	second := order("card-00001", "P1", 1, 900)
	second["cardType"], second["cardNo"], second["deadline"] = "KB", "9999-8888-7777-6666", "1h"
	keyed := map[string]string{httpapi.HeaderUser: "user-1", httpapi.HeaderIdempotencyKey: "second-card"}
	r := c.do(http.MethodPost, "/api/v1/orders", second, keyed, true)
	assert.Equal(t, int64(9), s.Stock(t, "P1").Available, "one order in all")
	require.Equal(t, http.StatusConflict, r.code,
		"the order was placed by the first request, with the SAMSUNG card; the second was answered %d %s", r.code, r.body)
	assert.Equal(t, httpapi.CodeAlreadyPlaced, r.problem(t).Code)
}

// pausingProxy forwards TCP to target; while paused it stops handing the
// server's bytes to the client (they are held, not lost), as a network that
// drops answers would: a request reaches the server, its answer does not
// come back in time.
type pausingProxy struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	paused bool
	resume chan struct{}
}

func newPausingProxy(t *testing.T, target string) *pausingProxy {
	p := &pausingProxy{l: testenv.Listen(t), target: target, resume: make(chan struct{})}
	forward(t, p.l, target, func(in, out net.Conn) { _, _ = io.Copy(out, in) }, p.serverToClient)
	return p
}

// forward accepts connections on l until it closes, dials target for each,
// and runs up (client to server) and down (server to client) on the pair.
func forward(t *testing.T, l net.Listener, target string, up, down func(from, to net.Conn)) {
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				continue
			}
			t.Cleanup(func() { _ = in.Close(); _ = out.Close() })
			go up(in, out)
			go down(out, in)
		}
	}()
}

func (p *pausingProxy) serverToClient(from, to net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.paused {
				ch := p.resume
				p.mu.Unlock()
				<-ch
				p.mu.Lock()
			}
			p.mu.Unlock()
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *pausingProxy) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = true
}

func (p *pausingProxy) unpause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		p.paused = false
		close(p.resume)
		p.resume = make(chan struct{})
	}
}

func (p *pausingProxy) addr() string { return p.l.Addr().String() }

// waitReserved polls until the product's reserved+sold units reach n.
func waitReserved(t *testing.T, s *testenv.Stack, product string, n int64, within time.Duration) {
	t.Helper()
	testenv.Eventually(t, within, func() bool {
		st := s.Stock(t, product)
		return st.Reserved+st.Sold >= n
	}, "reserved+sold of "+product+" reaches the orders placed")
}

// A start that reached Temporal but whose answer did not come back in
// startTimeout is a 503 that names the order id the API chose: the order
// runs, and a retry with that id finds it (409 ALREADY_PLACED) instead of
// placing a second order.
func TestA503AfterTheStartNamesTheOrderItMayHavePlaced(t *testing.T) {
	testenv.NeedsServices(t, "PostgreSQL, the Temporal dev server and pgsim")
	s := testenv.NewStack(t, testenv.Processing(time.Hour), nil)
	proxy := newPausingProxy(t, s.Config.TemporalAddress)
	api := s.StartAPI(t, func(cfg *httpapi.Config) { cfg.TemporalAddress = proxy.addr() })
	c := newClient(t, api)
	s.SetStock(t, "P1", 10)

	proxy.pause()
	r := c.do(http.MethodPost, "/api/v1/orders", order("", "P1", 1, 900), customer, true)
	proxy.unpause()
	require.Equal(t, http.StatusServiceUnavailable, r.code, "%s", r.body)
	p := r.problem(t)
	require.NotEmpty(t, p.OrderID, "the 503 names the order it may have placed")
	assert.Contains(t, p.Detail, "may have been placed")
	waitReserved(t, s, "P1", 1, 20*time.Second) // placed all the same

	retry := c.do(http.MethodPost, "/api/v1/orders", order(p.OrderID, "P1", 1, 900), customer, true)
	require.Equal(t, http.StatusConflict, retry.code, "%s", retry.body)
	assert.Equal(t, httpapi.CodeAlreadyPlaced, retry.problem(t).Code)
	st := s.Stock(t, "P1")
	assert.Equal(t, int64(1), st.Reserved+st.Sold, "one order for one checkout")
	require.Equal(t, http.StatusOK, c.do(http.MethodGet, "/api/v1/orders/"+p.OrderID, nil, nil, true).code, "readable by its id")
}

// The same 503 under an Idempotency-Key: the key is released and the retry
// takes up the same order id (one reservation) and answers it.
func TestA503UnderAKeyIsTakenUpByTheSameOrder(t *testing.T) {
	testenv.NeedsServices(t, "PostgreSQL, the Temporal dev server and pgsim")
	s := testenv.NewStack(t, testenv.Processing(time.Hour), nil)
	proxy := newPausingProxy(t, s.Config.TemporalAddress)
	api := s.StartAPI(t, func(cfg *httpapi.Config) { cfg.TemporalAddress = proxy.addr() })
	c := newClient(t, api)
	s.SetStock(t, "P1", 10)
	keyed := map[string]string{httpapi.HeaderUser: "user-1", httpapi.HeaderIdempotencyKey: "k-503"}

	proxy.pause()
	r := c.do(http.MethodPost, "/api/v1/orders", order("", "P1", 1, 900), keyed, true)
	proxy.unpause()
	require.Equal(t, http.StatusServiceUnavailable, r.code, "%s", r.body)
	waitReserved(t, s, "P1", 1, 20*time.Second)

	retry := c.do(http.MethodPost, "/api/v1/orders", order("", "P1", 1, 900), keyed, true)
	require.Equal(t, http.StatusCreated, retry.code, "%s", retry.body)
	var a httpapi.OrderAnswer
	retry.decode(t, &a)
	row, err := s.Store.GetOrder(context.Background(), a.OrderID)
	require.NoError(t, err)
	assert.Equal(t, "user-1", row.UserID)
	st := s.Stock(t, "P1")
	assert.Equal(t, int64(1), st.Reserved+st.Sold, "one order for the key")
}

// PUT stock with an available count whose total (available + reserved +
// sold) would overflow is the client's error, a 400, not a 503 a client
// would retry for ever.
func TestAnAvailableCountThatOverflowsIsABadRequest(t *testing.T) {
	s, _, c := apiStack(t, time.Hour, nil)
	s.SetStock(t, "P1", 10)
	require.Equal(t, http.StatusCreated, c.do(http.MethodPost, "/api/v1/orders", order("ovf-00001", "P1", 1, 900), customer, true).code)
	waitReserved(t, s, "P1", 1, 20*time.Second)
	r := c.do(http.MethodPut, "/api/v1/products/P1/stock", map[string]any{"available": int64(math.MaxInt64)}, nil, true)
	t.Logf("answer: %d %s", r.code, strings.TrimSpace(string(r.body)))
	assert.Equal(t, http.StatusBadRequest, r.code, "an available count too large is the client's error, not a 503")
}

// Every /api/ request must carry the token, one that no route takes too (a
// wrong method, a typo): 401 before anything else; with the token a wrong
// method is a 405 naming the methods the path takes.
func TestAnAPIRequestNoRouteTakesStillNeedsTheToken(t *testing.T) {
	token := strings.Repeat("cd", 20)
	_, api, _ := apiStack(t, 0, func(cfg *httpapi.Config) { cfg.Token = token })
	req, err := http.NewRequest(http.MethodDelete, "http://"+api.Addr()+"/api/v1/orders/ord-00000001", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	t.Logf("answer without a token: %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "an /api/ request without the token")

	c := newClient(t, api)
	c.token = token
	r := c.do(http.MethodDelete, "/api/v1/orders/ord-00000001", nil, nil, false)
	require.Equal(t, http.StatusMethodNotAllowed, r.code, "%s", r.body)
	assert.Equal(t, "GET", r.header.Get("Allow"))
	assert.Equal(t, httpapi.CodeMethodNotAllowed, r.problem(t).Code)
	r = c.do(http.MethodGet, "/api/v2/nothing", nil, nil, false)
	require.Equal(t, http.StatusNotFound, r.code, "%s", r.body)
}

// --first-answer-wait must leave the answer room inside the server's write
// timeout, or every waiting POST would be cut off after its order was
// placed.
func TestAFirstAnswerWaitBeyondTheWriteTimeoutIsRefused(t *testing.T) {
	cfg := httpapi.Config{HTTPAddr: "127.0.0.1:8080", FirstAnswerWait: time.Minute, HTTPTimeouts: config.DefaultHTTPTimeouts()}
	cfg.TaskQueue, cfg.GatewayURL, cfg.CallbackURL = "payments", "http://127.0.0.1:1", "http://127.0.0.1:2/callbacks/gateway"
	cfg.DatabaseURL, cfg.GatewaySecret = "postgres://127.0.0.1/x", "s"
	assert.ErrorContains(t, cfg.Validate(), "write timeout", "first answer wait %s beyond the write timeout %s", cfg.FirstAnswerWait, cfg.HTTPTimeouts.Write)
	cfg.FirstAnswerWait = 2 * time.Second
	assert.NoError(t, cfg.Validate())
}

// A first answer that waits (the worker down) backs off its reads of the
// order's row: a worker outage must not multiply the API's load on the
// database the worker needs to recover. The API's database connections go
// through a proxy that counts the queries (Bind messages) they send.
func TestAWaitingFirstAnswerBacksOffItsPolls(t *testing.T) {
	testenv.NeedsServices(t, "PostgreSQL, the Temporal dev server and pgsim")
	s := testenv.NewStack(t, testenv.Processing(time.Hour), nil)
	u, err := url.Parse(s.DBURL)
	require.NoError(t, err)
	counter := newPGCounter(t, u.Host)
	u.Host = counter.l.Addr().String()
	q := u.Query()
	q.Set("sslmode", "disable")
	u.RawQuery = q.Encode()
	api := s.StartAPI(t, func(cfg *httpapi.Config) { cfg.DatabaseURL = u.String() })
	c := newClient(t, api)
	s.SetStock(t, "P1", 10)
	require.NoError(t, s.Worker.Stop()) // the worker is down: no order gets its row

	before := counter.binds.Load()
	start := time.Now()
	r := c.do(http.MethodPost, "/api/v1/orders", order("poll-00001", "P1", 1, 900), customer, true)
	took := time.Since(start)
	require.Equal(t, http.StatusCreated, r.code, "%s", r.body)
	queries := counter.binds.Load() - before
	t.Logf("one POST, answered RESERVING after %s, sent %d queries to PostgreSQL", took.Round(time.Millisecond), queries)
	assert.LessOrEqual(t, queries, int64(50), "queries one waiting request sends")
}

// pgCounter forwards PostgreSQL connections to target and counts the
// extended-protocol Bind messages (one per query pgx sends) clients send.
type pgCounter struct {
	l     net.Listener
	binds atomic.Int64
}

func newPGCounter(t *testing.T, target string) *pgCounter {
	p := &pgCounter{l: testenv.Listen(t)}
	forward(t, p.l, target, p.clientToServer, func(out, in net.Conn) { _, _ = io.Copy(in, out) })
	return p
}

func (p *pgCounter) clientToServer(in, out net.Conn) {
	defer out.Close()
	r := bufio.NewReader(in)
	head := make([]byte, 5)
	// Untyped messages first: SSLRequest/GSSENCRequest, then the startup message.
	for {
		if _, err := io.ReadFull(r, head[:4]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(head[:4]))
		body := make([]byte, n-4)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		if _, err := out.Write(append(append([]byte{}, head[:4]...), body...)); err != nil {
			return
		}
		code := binary.BigEndian.Uint32(body[:4])
		if code != 80877103 && code != 80877104 { // not an encryption request: the startup message
			break
		}
	}
	for {
		if _, err := io.ReadFull(r, head); err != nil {
			return
		}
		if head[0] == 'B' {
			p.binds.Add(1)
		}
		n := int(binary.BigEndian.Uint32(head[1:5]))
		body := make([]byte, n-4)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		if _, err := out.Write(append(append([]byte{}, head...), body...)); err != nil {
			return
		}
	}
}
