package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/payguard/payguard/internal/process"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

// BenchmarkOrderLifecycle measures one order's database work end to end:
// reserve, record the create attempt and its answer, confirm (commit).
// Run: go test -run XXX -bench . ./store/
func BenchmarkOrderLifecycle(b *testing.B) {
	ctx := context.Background()
	s := testenv.Store(b)
	if _, err := s.SetStock(ctx, "P1", int64(b.N)+1); err != nil {
		b.Fatal(err)
	}
	// PostgreSQL's own CPU per order beside the client's time: fewer round
	// trips show in both.
	pgBefore := process.CommandCPUTime("postgres")
	b.ResetTimer()
	defer func() {
		b.ReportMetric(float64((process.CommandCPUTime("postgres")-pgBefore).Microseconds())/float64(b.N), "pg-µs/op")
	}()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := testenv.ID("bench")
			if _, err := s.Reserve(ctx, store.NewOrder{OrderID: id, ProductID: "P1", Quantity: 1, Amount: 100, UserID: "u1"}); err != nil {
				b.Error(err)
				return
			}
			begun, err := s.BeginAttempt(ctx, store.AttemptRequest{OrderID: id})
			if err != nil {
				b.Error(err)
				return
			}
			key := fmt.Sprintf("tx-%s", id)
			if err := s.FinishAttempt(ctx, store.Answer{OrderID: id, No: begun.Attempt.No, Outcome: store.OutcomeAccepted, TransactionKey: key}); err != nil {
				b.Error(err)
				return
			}
			if err := s.Advance(ctx, store.Change{OrderID: id, Order: status.OrderConfirmed, Payment: status.PaymentSuccess,
				TransactionKey: key, Reservation: store.CommitReservation, Cause: "bench"}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
