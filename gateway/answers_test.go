package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/gateway"
)

// A 2xx that names no transaction is not an acceptance: design §1 "a 2xx it
// cannot read" is UNKNOWN (it once came back accepted with no key).
func TestCreateAnswerWithoutTransactionKeyIsUnknown(t *testing.T) {
	for name, body := range map[string]string{
		"empty data":  `{"meta":{"result":"SUCCESS","errorCode":null,"message":null},"data":{}}`,
		"empty key":   `{"meta":{"result":"SUCCESS","errorCode":null,"message":null},"data":{"transactionKey":"","status":"PENDING","reason":null}}`,
		"key is null": `{"meta":{"result":"SUCCESS","errorCode":null,"message":null},"data":{"transactionKey":null,"status":"PENDING","reason":null}}`,
		"wrong shape": `{"meta":{"result":"SUCCESS","errorCode":null,"message":null},"data":{"transaction_key":"T1","status":"PENDING"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = w.Write([]byte(body))
			}))
			t.Cleanup(srv.Close)
			created, err := client(t, srv.URL).CreatePayment(context.Background(), order, "", "")
			if err == nil {
				t.Errorf("2xx without a transactionKey accepted as Created%+v: want ErrOutcomeUnknown", created)
				return
			}
			requireClass(t, err, gateway.ErrOutcomeUnknown)
		})
	}
}

// Truncated or odd 2xx answers, and a 5xx claiming success, are unknown.
func TestTruncatedOrOddSuccessIsUnknown(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		"truncated": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "500")
			_, _ = w.Write([]byte(`{"meta":{"result":"SUCCESS"},"data":{"transactionKey":"T1"`))
		},
		"data array": func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"meta":{"result":"SUCCESS"},"data":[]}`))
		},
		"trailing": func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"meta":{"result":"SUCCESS"},"data":{"transactionKey":"T1"}}{}`))
		},
		"5xx success": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(502)
			_, _ = w.Write([]byte(`{"meta":{"result":"SUCCESS"},"data":{"transactionKey":"T1"}}`))
		},
		"no-content 204": func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) },
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			_, err := client(t, srv.URL).CreatePayment(context.Background(), order, "", "")
			requireClass(t, err, gateway.ErrOutcomeUnknown)
		})
	}
}

// A create answered 307 reached a gateway: it is never "unreachable", even
// when the redirect's target cannot be dialled (net/http once followed it).
func TestRedirectedCreateIsNotUnreachable(t *testing.T) {
	dead := "http://" + closedPort(t) + "/api/v1/payments"
	var hits int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		http.Redirect(w, r, dead, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(srv.Close)
	_, err := client(t, srv.URL).CreatePayment(context.Background(), order, "", "")
	require.Error(t, err)
	assert.Equal(t, 1, hits, "the create reached the gateway")
	assert.NotErrorIs(t, err, gateway.ErrUnreachable, "a create the gateway received is never 'unreachable': %v", err)
}
