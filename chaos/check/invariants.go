package check

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

// MaxExamples bounds the examples kept per invariant: enough to start a
// diagnosis, few enough for a terminal.
const MaxExamples = 10

// Result is one invariant's verdict.
type Result struct {
	ID         string   `json:"id"`
	Rule       string   `json:"rule"`
	Checked    int      `json:"checked"`
	Violations int      `json:"violations"`
	Examples   []string `json:"examples,omitempty"`
}

func (r *Result) fail(format string, a ...any) {
	r.Violations++
	if len(r.Examples) < MaxExamples {
		r.Examples = append(r.Examples, fmt.Sprintf(format, a...))
	}
}

// Run checks every invariant, in order I1..I8.
func Run(b Books) []Result {
	return []Result{netCharges(b), oneTransaction(b), stockBalances(b), allFinal(b), paymentAgrees(b), forgedRefused(b), replays(b),
		notLostWhileReachable(b)}
}

// Violations sums the violations of all results.
func Violations(rs []Result) int {
	n := 0
	for _, r := range rs {
		n += r.Violations
	}
	return n
}

// orderIDs is every order any book knows of, sorted so examples repeat
// from run to run.
func orderIDs(b Books) []string {
	set := map[string]bool{}
	for _, id := range b.Launched {
		set[id] = true
	}
	for id := range b.Orders {
		set[id] = true
	}
	for id := range b.Gateway {
		set[id] = true
	}
	return slices.Sorted(maps.Keys(set))
}

func txList(g GatewayOrder) string {
	parts := make([]string, 0, len(g.Transactions))
	for _, tx := range g.Transactions {
		p := tx.TransactionKey + " " + tx.Status
		if tx.Reason != "" {
			p += "/" + tx.Reason
		}
		parts = append(parts, p)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// I1: the customer is charged exactly once for a confirmed order and not at
// all otherwise; refunds count as given back.
func netCharges(b Books) Result {
	r := Result{ID: "I1", Rule: "per order, net successful charges = 1 if CONFIRMED else 0; nothing left PENDING at the gateway"}
	for _, id := range orderIDs(b) {
		r.Checked++
		g := b.Gateway[id]
		o := b.Orders[id]
		want := 0
		if o.Status == status.OrderConfirmed && !givenBack(o) {
			want = 1
		}
		if got := g.successes(); got != want {
			r.fail("order %s: %s in the database, %d successful charges at the gateway %s", id, statusOf(o.Status), got, txList(g))
			continue
		}
		for _, tx := range g.Transactions {
			if tx.Status == gateway.StatusPending {
				r.fail("order %s: %s in the database, transaction %s still PENDING at the gateway (may charge later)", id, statusOf(o.Status), tx.TransactionKey)
				break
			}
		}
	}
	return r
}

// givenBack is a CONFIRMED order refunded in full at the customer's
// request: its charge refunded and its stock returned (docs/design.md §12),
// so it keeps no charge and sold nothing.
func givenBack(o store.Order) bool {
	return o.Status == status.OrderConfirmed && o.PaymentStatus == status.PaymentRefunded && o.Reservation == store.ReservationReturned
}

func statusOf(s status.Order) string {
	if s == "" {
		return "absent"
	}
	return string(s)
}

// I2: without gateway-honoured idempotency keys, a second create that
// reached the gateway is a second transaction: there must be none. With
// them, every create of an order carries the order's one key, and the
// gateway may act on a key once: again at most one transaction per order.
func oneTransaction(b Books) Result {
	r := Result{ID: "I2", Rule: "at most one gateway transaction per order (no second create that reached the gateway; one side effect per key with keys)"}
	for _, id := range slices.Sorted(maps.Keys(b.Gateway)) {
		r.Checked++
		if g := b.Gateway[id]; len(g.Transactions) > 1 {
			r.fail("order %s: %d transactions %s from %d create requests", id, len(g.Transactions), txList(g), g.CreateRequests)
		}
	}
	return r
}

// I3: stock is conserved, nothing stays reserved once every order ended,
// and what is sold is exactly what confirmed orders bought.
func stockBalances(b Books) Result {
	r := Result{ID: "I3", Rule: "per product total = available + reserved + sold, reserved = 0, sold = quantity of CONFIRMED orders"}
	confirmed := map[string]int64{}
	for _, o := range b.Orders {
		if o.Status == status.OrderConfirmed && !givenBack(o) {
			confirmed[o.ProductID] += o.Quantity
		}
	}
	for _, p := range slices.Sorted(maps.Keys(b.Products)) {
		r.Checked++
		s := b.Products[p]
		switch {
		case s.Total != s.Available+s.Reserved+s.Sold:
			r.fail("product %s: total %d != available %d + reserved %d + sold %d", p, s.Total, s.Available, s.Reserved, s.Sold)
		case s.Reserved != 0:
			r.fail("product %s: %d units still reserved after every order ended", p, s.Reserved)
		case s.Sold != confirmed[p]:
			r.fail("product %s: sold %d, but CONFIRMED orders bought %d", p, s.Sold, confirmed[p])
		}
	}
	return r
}

// I4: every order ended, in the database and in Temporal, the same way.
func allFinal(b Books) Result {
	r := Result{ID: "I4", Rule: "every order final in the database and its workflow closed with the same status"}
	for _, id := range orderIDs(b) {
		r.Checked++
		o, inDB := b.Orders[id]
		w, inTemporal := b.Workflows[id]
		switch {
		case !inDB && neverReserved(b, id, w):
			// Cancelled while Reserve had not committed (e.g. between its
			// retries): nothing was held and nothing reached the gateway, so
			// there is no order to record. Money-safe, and counted apart.
		case !inDB:
			r.fail("order %s: not in the database (workflow %s)", id, w.Status)
		case !o.Status.Final():
			r.fail("order %s: %s in the database, not final", id, o.Status)
		case !inTemporal:
			r.fail("order %s: %s in the database, no workflow in Temporal", id, o.Status)
		case w.Status == WorkflowCompleted && w.Result != o.Status:
			r.fail("order %s: %s in the database, workflow returned %s", id, o.Status, w.Result)
		case w.Status == WorkflowCanceled && o.Status != status.OrderCancelled:
			r.fail("order %s: %s in the database, workflow cancelled", id, o.Status)
		case w.Status != WorkflowCompleted && w.Status != WorkflowCanceled:
			r.fail("order %s: %s in the database, workflow %s", id, o.Status, w.Status)
		case w.SearchStatus != string(o.Status):
			r.fail("order %s: %s in the database, OrderStatus search attribute %q", id, o.Status, w.SearchStatus)
		}
	}
	for _, id := range b.StillRunning {
		r.fail("workflow %s still running at the end", id)
	}
	return r
}

// neverReserved is an order an operator cancelled before its reservation:
// its workflow ended cancelled and the gateway never heard of it.
func neverReserved(b Books, id string, w Workflow) bool {
	_, atGateway := b.Gateway[id]
	return !atGateway && w.Status == WorkflowCanceled && w.SearchStatus == string(status.OrderCancelled)
}

// CancelledBeforeReserve lists the orders cancelled before they were
// reserved: not violations, but worth a line in a report.
func CancelledBeforeReserve(b Books) []string {
	var out []string
	for _, id := range orderIDs(b) {
		if _, inDB := b.Orders[id]; !inDB && neverReserved(b, id, b.Workflows[id]) {
			out = append(out, id)
		}
	}
	return out
}

// I5: what the database says was paid is what the gateway holds.
func paymentAgrees(b Books) Result {
	r := Result{ID: "I5", Rule: "the database's payment status and transaction key agree with the gateway"}
	for _, id := range slices.Sorted(maps.Keys(b.Orders)) {
		o := b.Orders[id]
		r.Checked++
		g := b.Gateway[id]
		tx, known := g.find(o.TransactionKey)
		switch {
		case o.TransactionKey != "" && !known:
			r.fail("order %s: transaction key %s in the database is not one of the order's at the gateway %s", id, o.TransactionKey, txList(g))
		case (o.Status == status.OrderConfirmed && !givenBack(o)) != (o.PaymentStatus == status.PaymentSuccess):
			r.fail("order %s: %s with payment %s", id, o.Status, o.PaymentStatus)
		case o.Status == status.OrderConfirmed && !givenBack(o) && tx.Status != gateway.StatusSuccess:
			r.fail("order %s: CONFIRMED with key %s, which the gateway holds as %q", id, o.TransactionKey, tx.Status)
		case o.Status != status.OrderConfirmed && known && tx.Status == gateway.StatusSuccess:
			r.fail("order %s: %s, yet its key %s is SUCCESS at the gateway", id, o.Status, o.TransactionKey)
		case o.PaymentStatus == status.PaymentRefunded && known && tx.Reason != "REFUNDED":
			r.fail("order %s: payment REFUNDED, the gateway holds %s as %s/%s", id, o.TransactionKey, tx.Status, tx.Reason)
		}
	}
	return r
}

// I6: a callback that is not the gateway's own is refused and moves nothing.
func forgedRefused(b Books) Result {
	r := Result{ID: "I6", Rule: "every forged/stale/malformed callback refused with 4xx and changed nothing"}
	keys := map[string]string{}
	for id, o := range b.Orders {
		if o.TransactionKey != "" {
			keys[o.TransactionKey] = id
		}
	}
	for _, f := range b.Forged {
		if f.Code == 0 {
			continue // never reached a worker: nothing to judge
		}
		r.Checked++
		switch {
		case f.Kind == KindUnknownOrder && f.Code == http.StatusServiceUnavailable:
			// Correctly signed: only the database can say the order is
			// unknown, and while it is unreachable "retry later" is right.
		case f.Code < 400 || f.Code > 499:
			r.fail("%s callback for order %s (key %s) answered HTTP %d", f.Kind, f.OrderID, f.TransactionKey, f.Code)
		case keys[f.TransactionKey] != "":
			r.fail("%s callback key %s was recorded on order %s", f.Kind, f.TransactionKey, keys[f.TransactionKey])
		}
	}
	return r
}

// KindUnknownOrder is a correctly signed callback for an order that does
// not exist (the other kinds fail their checks before any lookup).
const KindUnknownOrder = "unknown-order"

// I7: a closed workflow's history replays against today's code, so the
// run exercised only deterministic paths.
func replays(b Books) Result {
	r := Result{ID: "I7", Rule: "every closed workflow's history replays against today's code"}
	for _, id := range slices.Sorted(maps.Keys(b.Replays)) {
		r.Checked++
		if err := b.Replays[id]; err != "" {
			r.fail("workflow %s: %s", id, err)
		}
	}
	return r
}
