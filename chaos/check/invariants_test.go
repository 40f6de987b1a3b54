package check

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

// cleanBooks are three orders that ended right: one confirmed, one failed,
// one cancelled after its charge was refunded.
func cleanBooks() Books {
	tx := func(key, st, reason string) gateway.Transaction {
		return gateway.Transaction{TransactionKey: key, Status: st, Reason: reason}
	}
	return Books{
		Launched: []string{"o1", "o2", "o3"},
		Orders: map[string]store.Order{
			"o1": {OrderID: "o1", ProductID: "P1", Quantity: 2, Status: status.OrderConfirmed, PaymentStatus: status.PaymentSuccess, TransactionKey: "k1"},
			"o2": {OrderID: "o2", ProductID: "P1", Quantity: 1, Status: status.OrderFailed, PaymentStatus: status.PaymentFailed, TransactionKey: "k2"},
			"o3": {OrderID: "o3", ProductID: "P2", Quantity: 1, Status: status.OrderCancelled, PaymentStatus: status.PaymentRefunded, TransactionKey: "k3"},
		},
		Products: map[string]store.Stock{
			"P1": {ProductID: "P1", Total: 10, Available: 8, Sold: 2},
			"P2": {ProductID: "P2", Total: 5, Available: 5},
		},
		Gateway: map[string]GatewayOrder{
			"o1": {CreateRequests: 1, Transactions: []gateway.Transaction{tx("k1", gateway.StatusSuccess, "")}},
			"o2": {CreateRequests: 2, Transactions: []gateway.Transaction{tx("k2", gateway.StatusFailed, "LIMIT_EXCEEDED")}},
			"o3": {CreateRequests: 1, Transactions: []gateway.Transaction{tx("k3", gateway.StatusCancelled, "REFUNDED")}},
		},
		Workflows: map[string]Workflow{
			"o1": {Status: WorkflowCompleted, Result: status.OrderConfirmed, SearchStatus: "CONFIRMED"},
			"o2": {Status: WorkflowCompleted, Result: status.OrderFailed, SearchStatus: "FAILED"},
			"o3": {Status: WorkflowCanceled, SearchStatus: "CANCELLED"},
		},
		Forged:  []Forged{{Kind: "bad-signature", OrderID: "o1", TransactionKey: "forged-1", Code: 401}, {Kind: "stale", OrderID: "o2", Code: 0}},
		Replays: map[string]string{"order-o1": "", "order-o2": "", "order-o3": ""},
	}
}

func violationsByID(rs []Result) map[string]int {
	out := map[string]int{}
	for _, r := range rs {
		out[r.ID] = r.Violations
	}
	return out
}

func TestCleanBooksHaveNoViolations(t *testing.T) {
	rs := Run(cleanBooks())
	require.Len(t, rs, 7)
	for _, r := range rs {
		assert.Zero(t, r.Violations, "%s: %v", r.ID, r.Examples)
		assert.Positive(t, r.Checked, "%s checked nothing", r.ID)
	}
}

// Each case breaks the books the way a real bug would, and exactly the
// invariant that guards against it must report it.
func TestEachViolationIsReported(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Books)
		want   map[string]int
	}{
		{"second charge never refunded", func(b *Books) {
			g := b.Gateway["o1"]
			g.CreateRequests = 2
			g.Transactions = append(g.Transactions, gateway.Transaction{TransactionKey: "k1b", Status: gateway.StatusSuccess})
			b.Gateway["o1"] = g
		}, map[string]int{"I1": 1, "I2": 1}},
		{"failed order charged", func(b *Books) {
			b.Gateway["o2"].Transactions[0].Status = gateway.StatusSuccess
		}, map[string]int{"I1": 1, "I5": 1}},
		{"transaction left pending", func(b *Books) {
			b.Gateway["o2"].Transactions[0].Status = gateway.StatusPending
		}, map[string]int{"I1": 1}},
		{"reservation leaked", func(b *Books) {
			b.Products["P2"] = store.Stock{ProductID: "P2", Total: 5, Available: 4, Reserved: 1}
		}, map[string]int{"I3": 1}},
		{"stock not conserved", func(b *Books) {
			b.Products["P2"] = store.Stock{ProductID: "P2", Total: 5, Available: 4}
		}, map[string]int{"I3": 1}},
		{"sold without a confirmed order", func(b *Books) {
			b.Products["P2"] = store.Stock{ProductID: "P2", Total: 5, Available: 4, Sold: 1}
		}, map[string]int{"I3": 1}},
		{"order stuck", func(b *Books) {
			o := b.Orders["o2"]
			o.Status = status.OrderPending
			b.Orders["o2"] = o
			b.Workflows["o2"] = Workflow{Status: "Failed"}
		}, map[string]int{"I4": 1}},
		{"workflow failed", func(b *Books) {
			b.Workflows["o2"] = Workflow{Status: "Failed", SearchStatus: "FAILED"}
		}, map[string]int{"I4": 1}},
		{"status flipped back after compensation", func(b *Books) {
			b.Workflows["o3"] = Workflow{Status: WorkflowCanceled, SearchStatus: "PENDING"}
		}, map[string]int{"I4": 1}},
		{"launched order never reached the database", func(b *Books) {
			b.Launched = append(b.Launched, "o4")
		}, map[string]int{"I4": 1}},
		{"cancelled before the reservation was made", func(b *Books) {
			b.Launched = append(b.Launched, "o4")
			b.Workflows["o4"] = Workflow{Status: WorkflowCanceled, SearchStatus: "CANCELLED"}
		}, map[string]int{}},
		{"cancelled before the reservation, yet charged", func(b *Books) {
			b.Launched = append(b.Launched, "o4")
			b.Workflows["o4"] = Workflow{Status: WorkflowCanceled, SearchStatus: "CANCELLED"}
			b.Gateway["o4"] = GatewayOrder{CreateRequests: 1, Transactions: []gateway.Transaction{{TransactionKey: "k4", Status: gateway.StatusSuccess}}}
		}, map[string]int{"I1": 1, "I4": 1}},
		{"refund still running", func(b *Books) {
			b.StillRunning = []string{"refund-o3-k3"}
		}, map[string]int{"I4": 1}},
		{"confirmed with the wrong key", func(b *Books) {
			o := b.Orders["o1"]
			o.TransactionKey = "k9"
			b.Orders["o1"] = o
		}, map[string]int{"I5": 1}},
		{"refunded payment not refunded", func(b *Books) {
			b.Gateway["o3"].Transactions[0].Reason = "CANCELLED"
		}, map[string]int{"I5": 1}},
		{"forged callback accepted", func(b *Books) {
			b.Forged[0].Code = 200
		}, map[string]int{"I6": 1}},
		{"signed callback for an unknown order while the database is down", func(b *Books) {
			b.Forged = append(b.Forged, Forged{Kind: KindUnknownOrder, OrderID: "x", TransactionKey: "forged-2", Code: 503})
		}, map[string]int{}},
		{"forged signature answered 503", func(b *Books) {
			b.Forged[0].Code = 503
		}, map[string]int{"I6": 1}},
		{"forged key recorded", func(b *Books) {
			o := b.Orders["o2"]
			o.TransactionKey = "forged-1"
			b.Orders["o2"] = o
		}, map[string]int{"I5": 1, "I6": 1}},
		{"history does not replay", func(b *Books) {
			b.Replays["order-o1"] = "TMPRL1100 nondeterministic"
		}, map[string]int{"I7": 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := cleanBooks()
			c.mutate(&b)
			got := violationsByID(Run(b))
			for id, n := range got {
				assert.Equal(t, c.want[id], n, "%s", id)
			}
		})
	}
}

func TestCancelledBeforeReserveIsListed(t *testing.T) {
	b := cleanBooks()
	b.Launched = append(b.Launched, "o4", "o5")
	b.Workflows["o4"] = Workflow{Status: WorkflowCanceled, SearchStatus: "CANCELLED"}
	assert.Equal(t, []string{"o4"}, CancelledBeforeReserve(b))
	assert.Equal(t, 1, violationsByID(Run(b))["I4"], "o5 has no workflow and no record: still a violation")
}

func TestExamplesAreBounded(t *testing.T) {
	b := cleanBooks()
	for i := range 25 {
		b.Forged = append(b.Forged, Forged{Kind: "stale", OrderID: "o1", Code: 200 + i})
	}
	rs := Run(b)
	assert.Equal(t, 25, rs[5].Violations)
	assert.Len(t, rs[5].Examples, MaxExamples)
	assert.Equal(t, 25, Violations(rs))
}
