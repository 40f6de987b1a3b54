package clitest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/worker/service"
)

// PlaceOrder places an order for qty × product, amount 5000, on the stack
// with `starter order` (extra adds or overrides flags), and fails the test
// unless the starter took it.
func PlaceOrder(t testing.TB, s *testenv.Stack, orderID, product string, qty int, extra ...string) {
	t.Helper()
	out, err := Run(context.Background(), s.Getenv, append([]string{"order", "--product", product, "--qty", fmt.Sprint(qty),
		"--amount", "5000", "--order-id", orderID}, extra...)...)
	if err != nil {
		t.Fatalf("starter order %s: %v\n%s", orderID, err, out)
	}
}

// PendingOrder starts a stack on which only a callback can answer in time
// (the gateway holds every payment an hour and the first poll is a minute
// away), places orderID for 2 × P1 out of 5 on it, and waits until the
// order is PENDING.
func PendingOrder(t testing.TB, orderID string) (*testenv.Stack, store.Order) {
	t.Helper()
	s := testenv.NewStack(t, testenv.Processing(time.Hour), func(c *service.Config) { c.PollInitial, c.PollMax = time.Minute, time.Minute })
	s.SetStock(t, "P1", 5)
	PlaceOrder(t, s, orderID, "P1", 2)
	return s, s.WaitOrder(t, orderID, status.OrderPending, 30*time.Second)
}
