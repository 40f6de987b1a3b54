package simulator_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/pgsim/simulator"
)

// Helpers of the simulator's tests: a callback receiver that checks
// signatures, and raw HTTP calls that decode the gateway's envelope.

// callbackSink records the callbacks it receives, verifying each signature.
type callbackSink struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []gateway.Transaction
	status atomic.Int32 // answer code; 200 unless set
	tries  atomic.Int32 // every POST, answered or refused
	conns  atomic.Int32 // connections opened to it
}

// sinkAnswer is the body the sink answers with, as the worker's callback
// endpoint answers (a sender that does not read it cannot reuse its
// connection).
const sinkAnswer = `{"accepted":true}`

func newSink(t *testing.T) *callbackSink {
	s := &callbackSink{}
	s.status.Store(200)
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.tries.Add(1)
		body, _ := io.ReadAll(r.Body)
		if err := gateway.Verify([]byte(testenv.Secret), r.Header.Get(gateway.HeaderTimestamp), r.Header.Get(gateway.HeaderSignature),
			body, time.Now(), gateway.DefaultTolerance); err != nil {
			t.Errorf("callback signature: %v", err)
		}
		code := int(s.status.Load())
		if code == 200 {
			var tx gateway.Transaction
			require.NoError(t, json.Unmarshal(body, &tx))
			s.mu.Lock()
			s.got = append(s.got, tx)
			s.mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, sinkAnswer)
	}))
	s.srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	return s
}

func (s *callbackSink) received() []gateway.Transaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]gateway.Transaction(nil), s.got...)
}

// call is one answer. body is the envelope's data on success; on failure,
// for brevity, {"code": meta.errorCode, "message": meta.message} (the
// conformance test checks the envelope itself, in envelope).
type call struct {
	status   int
	header   http.Header
	body     map[string]any
	envelope map[string]any
	rawBody  string
}

func do(t *testing.T, method, url string, headers map[string]string, body string) call {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	c := call{status: resp.StatusCode, header: resp.Header, rawBody: string(raw)}
	_ = json.Unmarshal(raw, &c.envelope)
	if data, ok := c.envelope["data"].(map[string]any); ok {
		c.body = data
	} else if meta, ok := c.envelope["meta"].(map[string]any); ok {
		c.body = map[string]any{"code": meta["errorCode"], "message": meta["message"]}
	}
	return c
}

func createBody(orderID string, amount int64, callbackURL string) string {
	b, _ := json.Marshal(gateway.CreateRequest{OrderID: orderID, Amount: amount, CardType: "SAMSUNG", CardNo: "1234-5678-9814-1451", CallbackURL: callbackURL})
	return string(b)
}

func create(t *testing.T, s *simulator.Server, orderID, key, callbackURL string) call {
	h := map[string]string{"X-USER-ID": "u1"}
	if key != "" {
		h["Idempotency-Key"] = key
	}
	return do(t, http.MethodPost, s.GatewayURL()+"/api/v1/payments", h, createBody(orderID, 5000, callbackURL))
}

func slowProcessing() simulator.Faults {
	f := testenv.QuietFaults()
	f.Processing = simulator.Processing{Min: simulator.Duration(time.Hour), Max: simulator.Duration(time.Hour), SuccessRate: 1}
	return f
}
