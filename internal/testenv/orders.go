package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/pgsim/simulator"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/worker/service"
)

// Processing is QuietFaults with every payment decided SUCCESS d after its
// create; an hour keeps a payment PENDING for as long as a test runs.
func Processing(d time.Duration) simulator.Faults {
	f := QuietFaults()
	f.Processing = simulator.Processing{Min: simulator.Duration(d), Max: simulator.Duration(d), SuccessRate: 1}
	return f
}

// SetStock sets the product's stock to qty, none of it reserved or sold.
func (s *Stack) SetStock(t testing.TB, product string, qty int64) {
	t.Helper()
	if _, err := s.Store.SetStock(context.Background(), product, qty); err != nil {
		t.Fatalf("set stock of %s: %v", product, err)
	}
}

// Stock is the product's stock as the database holds it now.
func (s *Stack) Stock(t testing.TB, product string) store.Stock {
	t.Helper()
	st, err := s.Store.GetStock(context.Background(), product)
	if err != nil {
		t.Fatalf("stock of %s: %v", product, err)
	}
	return st
}

// WaitOrder waits up to within for the order to be want in the database
// and returns it.
func (s *Stack) WaitOrder(t testing.TB, orderID string, want status.Order, within time.Duration) store.Order {
	t.Helper()
	var o store.Order
	Eventually(t, within, func() bool {
		var err error
		o, err = s.Store.GetOrder(context.Background(), orderID)
		return err == nil && o.Status == want
	}, fmt.Sprintf("order %s %s", orderID, want))
	return o
}

// Metrics is the worker's /metrics page.
func (s *Stack) Metrics(t testing.TB) string {
	t.Helper()
	resp, err := http.Get(s.MetricsURL())
	if err != nil {
		t.Fatalf("scrape /metrics: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read /metrics: %v", err)
	}
	return string(b)
}

// PostCallback posts body to the worker's callback endpoint, signed with
// secret as the gateway signs at the time at, and returns the worker's
// status code and answer.
func (s *Stack) PostCallback(t testing.TB, body []byte, secret string, at time.Time) (int, service.CallbackAnswer) {
	t.Helper()
	req, err := gateway.NewCallback(context.Background(), s.Config.CallbackURL, body)
	if err != nil {
		t.Fatal(err)
	}
	gateway.SignCallback(req, []byte(secret), body, at)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("post a callback: %v", err)
	}
	defer resp.Body.Close()
	var a service.CallbackAnswer
	_ = json.NewDecoder(resp.Body).Decode(&a) // the status code says what a body that is no answer means
	return resp.StatusCode, a
}

// CallbackBody is the body of the gateway's callback for the order's
// transaction key, in status st.
func CallbackBody(orderID, key, st string, amount int64) []byte {
	b, _ := json.Marshal(gateway.Transaction{TransactionKey: key, OrderID: orderID, Amount: amount, Status: st})
	return b
}
