package simulator_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/payguard/payguard/internal/testenv"
)

// FuzzCreate throws arbitrary bodies and headers at the create handler: every
// answer must be a JSON 2xx/4xx, never a 5xx (no fault is injected) or a panic.
func FuzzCreate(f *testing.F) {
	f.Add(`{"orderId":"order-1","amount":5000,"cardType":"KB","cardNo":"1234-5678-9012-3456","callbackUrl":"http://127.0.0.1:1/cb"}`, "u1", "")
	f.Add(`{"orderId":"order-1","amount":-1}`, "u1", "k")
	f.Add(`{"orderId":"order-1","amount":1e400}`, "u1", "")
	f.Add(`[1,2,3]`, "", "")
	f.Add(`{"orderId":null,"amount":null,"cardType":{},"cardNo":[],"callbackUrl":7}`, "u", "k2")
	f.Add("\x00\xff{", "u", "")
	f.Add(`{"orderId":"order-1","amount":1,"cardType":"KB","cardNo":"1234-5678-9012-3456","callbackUrl":"http://x"}{"x":1}`, "u", "")
	s := testenv.Pgsim(f, slowProcessing())
	client := &http.Client{}
	f.Fuzz(func(t *testing.T, body, user, key string) {
		req, err := http.NewRequest(http.MethodPost, s.GatewayURL()+"/api/v1/payments", strings.NewReader(body))
		if err != nil {
			t.Skip()
		}
		if user != "" && !strings.ContainsAny(user, "\r\n\x00") {
			req.Header.Set("X-USER-ID", user)
		}
		if key != "" && !strings.ContainsAny(key, "\r\n\x00") {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Skip() // the client refused its own header
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 500 {
			t.Fatalf("HTTP %d for body %q: %s", resp.StatusCode, body, raw)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Fatalf("content type %q for body %q", ct, body)
		}
	})
}
