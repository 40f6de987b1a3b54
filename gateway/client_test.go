package gateway_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/gateway"
)

var order = gateway.CreateRequest{OrderID: "ord-o1", Amount: 5000, CardType: "KB", CardNo: "1234-5678-9012-3456", CallbackURL: "http://127.0.0.1:1/cb"}

func client(t *testing.T, base string) *gateway.Client {
	t.Helper()
	c, err := gateway.New(gateway.Config{BaseURL: base, ConnectTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// requireClass checks err belongs to exactly one class.
func requireClass(t *testing.T, err error, class error) {
	t.Helper()
	require.Error(t, err)
	for _, c := range []error{gateway.ErrUnreachable, gateway.ErrOutcomeUnknown, gateway.ErrRejected, gateway.ErrInvalidRequest} {
		assert.Equal(t, c == class, errors.Is(err, c), "errors.Is(%v, %v)", err, c)
	}
}

func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func TestRefusedConnectionNeverReachedTheGateway(t *testing.T) {
	_, err := client(t, "http://"+closedPort(t)).CreatePayment(context.Background(), order, "", "")
	requireClass(t, err, gateway.ErrUnreachable)
	var opErr *net.OpError
	require.ErrorAs(t, err, &opErr, "the transport error stays in the chain")
	assert.ErrorIs(t, err, syscall.ECONNREFUSED)
}

func TestDNSFailureNeverReachedTheGateway(t *testing.T) {
	_, err := client(t, "http://payguard-no-such-host.invalid:8090").Payment(context.Background(), "k")
	requireClass(t, err, gateway.ErrUnreachable)
	var dnsErr *net.DNSError
	assert.ErrorAs(t, err, &dnsErr)
}

// A listen backlog that is full drops new SYNs, so the dial itself times out.
func TestDialTimeoutNeverReachedTheGateway(t *testing.T) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	t.Cleanup(func() { syscall.Close(fd) })
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	require.NoError(t, syscall.Listen(fd, 0))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	addr := (&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: sa.(*syscall.SockaddrInet4).Port}).String()
	// Fill the accept queue; nobody ever accepts.
	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			break
		}
		held = append(held, c)
	}
	start := time.Now()
	_, err = client(t, "http://"+addr).CreatePayment(context.Background(), order, "", "")
	requireClass(t, err, gateway.ErrUnreachable)
	var netErr net.Error
	require.ErrorAs(t, err, &netErr)
	assert.True(t, netErr.Timeout(), "a dial timeout: %v", err)
	t.Logf("dial timed out after %s", time.Since(start))
}

func TestTLSHandshakeFailureNeverReachedTheGateway(t *testing.T) {
	// A plain HTTP server answers the ClientHello with garbage.
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	_, err := client(t, "https://"+srv.Listener.Addr().String()).CreatePayment(context.Background(), order, "", "")
	requireClass(t, err, gateway.ErrUnreachable)
}

// rawServer accepts connections on a loopback port and hands each to
// handle; the listener and every connection close when the test ends.
func rawServer(t *testing.T, handle func(net.Conn)) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go handle(c)
		}
	}()
	return l.Addr().String()
}

func TestSilentListenerIsAReadTimeoutWithUnknownOutcome(t *testing.T) {
	addr := rawServer(t, func(net.Conn) {}) // accepts, never answers
	start := time.Now()
	_, err := client(t, "http://"+addr).CreatePayment(context.Background(), order, "", "")
	requireClass(t, err, gateway.ErrOutcomeUnknown)
	assert.Less(t, time.Since(start), 3*time.Second, "the read timeout, not a hang")
}

func TestResetMidResponseIsUnknown(t *testing.T) {
	addr := rawServer(t, func(c net.Conn) {
		_, _ = http.ReadRequest(bufio.NewReader(c))
		_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{\"meta\":"))
		_ = c.(*net.TCPConn).SetLinger(0) // close with RST
		c.Close()
	})
	_, err := client(t, "http://"+addr).CreatePayment(context.Background(), order, "", "")
	requireClass(t, err, gateway.ErrOutcomeUnknown)
}

func TestAnswersAreClassifiedByStatus(t *testing.T) {
	cases := []struct {
		status int
		body   string
		class  error
		code   string
	}{
		{500, `{"meta":{"result":"FAIL","errorCode":"INTERNAL_ERROR","message":"boom"},"data":null}`, gateway.ErrOutcomeUnknown, "INTERNAL_ERROR"},
		{503, `service unavailable`, gateway.ErrOutcomeUnknown, ""},
		{400, `{"meta":{"result":"FAIL","errorCode":"BAD_REQUEST","message":"cardNo"},"data":null}`, gateway.ErrRejected, "BAD_REQUEST"},
		{404, `{"meta":{"result":"FAIL","errorCode":"NOT_FOUND","message":"no"},"data":null}`, gateway.ErrRejected, "NOT_FOUND"},
		// The status code decides the class, whatever the body claims.
		{400, `{"meta":{"result":"SUCCESS","errorCode":null,"message":null},"data":{"transactionKey":"T1","status":"PENDING","reason":null}}`, gateway.ErrRejected, ""},
		{409, `conflict`, gateway.ErrRejected, ""},
		{200, `not json`, gateway.ErrOutcomeUnknown, ""},
		// A 2xx is an answer only as the envelope saying SUCCESS around data.
		{200, `{"transactionKey":"T1","orderId":"ord-o1","status":"PENDING"}`, gateway.ErrOutcomeUnknown, ""},
		{200, `{"meta":{"result":"FAIL","errorCode":"INTERNAL_ERROR","message":"x"},"data":null}`, gateway.ErrOutcomeUnknown, ""},
		{200, `{"meta":{"result":"SUCCESS","errorCode":null,"message":null},"data":null}`, gateway.ErrOutcomeUnknown, ""},
	}
	for _, tc := range cases {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			t.Cleanup(srv.Close)
			_, err := client(t, srv.URL).CreatePayment(context.Background(), order, "", "")
			requireClass(t, err, tc.class)
			var ge *gateway.Error
			require.ErrorAs(t, err, &ge)
			assert.Equal(t, tc.status, ge.StatusCode)
			assert.Equal(t, tc.code, ge.Code)
		})
	}
}

func TestCreateSendsHeaders(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "u9", r.Header.Get("X-USER-ID"))
		assert.Equal(t, "key-1", r.Header.Get("Idempotency-Key"))
		w.WriteHeader(200)
		_, _ = w.Write([]byte(`{"meta":{"result":"SUCCESS","errorCode":null,"message":null},"data":{"transactionKey":"T1","status":"PENDING","reason":null}}`))
	}))
	t.Cleanup(srv.Close)
	got, err := client(t, srv.URL).CreatePayment(context.Background(), order, "u9", "key-1")
	require.NoError(t, err)
	assert.Equal(t, gateway.Created{TransactionKey: "T1", OrderID: "ord-o1", Status: "PENDING"}, got)
}

// Lookups and cancels name the user the context carries (the order's), or
// the client's default; a user outside the id rule is refused unsent.
func TestLookupsAndCancelsNameTheOrdersUser(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("X-USER-ID"))
		mu.Unlock()
		_, _ = w.Write([]byte(`{"meta":{"result":"SUCCESS","errorCode":null,"message":null},"data":{"orderId":"order-1","transactions":[]}}`))
	}))
	t.Cleanup(srv.Close)
	c := client(t, srv.URL)
	ctx := gateway.WithUser(context.Background(), "buyer-7")
	_, err := c.PaymentsByOrder(ctx, "order-1")
	require.NoError(t, err)
	_, _ = c.Payment(ctx, "T1")
	_, _ = c.Cancel(ctx, "T1")
	_, err = c.PaymentsByOrder(context.Background(), "order-1")
	require.NoError(t, err)
	mu.Lock()
	assert.Equal(t, []string{"buyer-7", "buyer-7", "buyer-7", "payguard"}, seen)
	mu.Unlock()
	_, err = c.PaymentsByOrder(gateway.WithUser(context.Background(), "bad\ruser"), "order-1")
	assert.ErrorIs(t, err, gateway.ErrInvalidRequest)
}

func TestNewRejectsBadURL(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8090", "ftp://x", "http://"} {
		_, err := gateway.New(gateway.Config{BaseURL: u})
		assert.Error(t, err, u)
	}
}
