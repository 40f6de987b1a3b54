package testenv

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/payguard/payguard/pgsim/simulator"
)

// Secret is the callback secret every test service shares.
const Secret = "test-secret"

// QuietFaults is a gateway that always answers at once and never fails; tests
// switch on exactly the faults they need.
func QuietFaults() simulator.Faults {
	f := simulator.DefaultFaults()
	f.Latency = simulator.Range{}
	f.Create.ErrorRate = 0
	f.Processing = simulator.Processing{Min: 0, Max: 0, SuccessRate: 1}
	return f
}

// Pgsim starts an in-process gateway simulator on free loopback ports,
// closed when the test ends.
func Pgsim(t testing.TB, faults simulator.Faults) *simulator.Server {
	t.Helper()
	return PgsimWith(t, faults, nil)
}

// PgsimWith is Pgsim with its configuration adjusted by tune (when not nil),
// e.g. unsigned callbacks.
func PgsimWith(t testing.TB, faults simulator.Faults, tune func(*simulator.Config)) *simulator.Server {
	t.Helper()
	cfg := simulator.Config{
		Addr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", Seed: 42, Secret: []byte(Secret),
		Idempotency: true, Faults: faults, Logger: Logger(t),
	}
	if tune != nil {
		tune(&cfg)
	}
	s := simulator.New(cfg)
	if err := s.Start(); err != nil {
		t.Fatalf("start pgsim: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Resolve decides a transaction at the gateway simulator (its admin call
// POST /admin/transactions/{key}/resolve): status, a reason for a FAILED
// one ("" for none), and whether the simulator sends its callback. The test
// fails unless the simulator took it; pgsim's own tests of the admin API
// call Admin.
func Resolve(t testing.TB, s *simulator.Server, key, status, reason string, callback bool) {
	t.Helper()
	body := map[string]any{"status": status, "callback": callback}
	if reason != "" {
		body["reason"] = reason
	}
	if code := Admin(t, s, http.MethodPost, "/admin/transactions/"+key+"/resolve", body, nil); code != http.StatusOK {
		t.Fatalf("resolve %s %s at the gateway: HTTP %d", key, status, code)
	}
}

// Admin sends an admin call and decodes the answer's data (the envelope's
// data; its meta when the call failed) into out, when not nil.
func Admin(t testing.TB, s *simulator.Server, method, path string, body any, out any) int {
	t.Helper()
	var r io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, s.AdminURL()+path, r)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("admin %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if out != nil {
		var env struct {
			Meta json.RawMessage `json:"meta"`
			Data json.RawMessage `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
			t.Fatalf("admin %s %s: decode: %v", method, path, err)
		}
		part := env.Data
		if string(part) == "null" {
			part = env.Meta
		}
		if err := json.Unmarshal(part, out); err != nil {
			t.Fatalf("admin %s %s: decode %s: %v", method, path, part, err)
		}
	}
	return resp.StatusCode
}

// PatchFaults merges fault settings, failing the test when refused.
func PatchFaults(t testing.TB, s *simulator.Server, patch map[string]any) {
	t.Helper()
	var out map[string]any
	if code := Admin(t, s, http.MethodPatch, "/admin/faults", patch, &out); code != http.StatusOK {
		t.Fatalf("patch faults %v: HTTP %d %v", patch, code, out)
	}
}
