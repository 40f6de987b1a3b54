package check

import (
	"testing"
	"time"

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
		// Placed at T+0, T+1, T+2 with a 60 s deadline; no outage; I8's
		// bound 20 s.
		BeganAt: began,
		Outcomes: map[string]store.Outcome{
			"o1": {OrderID: "o1", Status: status.OrderConfirmed, Payment: status.PaymentSuccess, PlacedAt: at(0), FinalAt: at(3), Deadline: at(60)},
			"o2": {OrderID: "o2", Status: status.OrderFailed, Payment: status.PaymentFailed, PlacedAt: at(1), FinalAt: at(4), Deadline: at(61)},
			"o3": {OrderID: "o3", Status: status.OrderCancelled, Payment: status.PaymentRefunded, OperatorCancel: true,
				PlacedAt: at(2), FinalAt: at(9), Deadline: at(62)},
		},
		LongEnough: 20 * time.Second,
	}
}

var began = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

// at is T+sec of the books' run.
func at(sec float64) time.Time { return began.Add(time.Duration(sec * float64(time.Second))) }

// lose marks an order of the books lost.
func lose(b *Books, id, kind string) {
	o := b.Outcomes[id]
	o.Lost, o.Status = kind, status.OrderCancelled
	b.Outcomes[id] = o
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
	require.Len(t, rs, 8)
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
		{"order lost while the gateway was reachable", func(b *Books) {
			lose(b, "o2", store.LostCancelled)
		}, map[string]int{"I8": 1}},
		{"order charged then refunded while the gateway was reachable", func(b *Books) {
			lose(b, "o1", store.LostRefunded)
		}, map[string]int{"I8": 1}},
		{"order lost through an outage that left too short a stretch", func(b *Books) {
			lose(b, "o2", store.LostCancelled)
			// T+1..T+61: reachable 1..15 (14 s), 30..40 (10 s), 50..61 (11 s).
			b.Unreachable = []Stretch{{From: at(40), To: at(50), Why: "pgsim-down"}, {From: at(15), To: at(30), Why: "link-blackhole"},
				{From: at(45), To: at(48), Why: "pgsim-5xx"}}
		}, map[string]int{}},
		{"order lost though one stretch of its window was long enough", func(b *Books) {
			lose(b, "o2", store.LostCancelled)
			b.Unreachable = []Stretch{{From: at(15), To: at(30), Why: "pgsim-down"}, {From: at(51), To: at(70), Why: "pgsim-down"}}
		}, map[string]int{"I8": 1}},
		{"an operator's cancel is not a lost order", func(b *Books) {
			o := b.Outcomes["o3"]
			o.Lost = ""
			b.Outcomes["o3"] = o
		}, map[string]int{}},
		{"an order without a deadline is not judged", func(b *Books) {
			lose(b, "o2", store.LostCancelled)
			o := b.Outcomes["o2"]
			o.Deadline = time.Time{}
			b.Outcomes["o2"] = o
		}, map[string]int{}},
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

// I8 checks the orders whose window held a long enough stretch, and no
// others: a bound of 0 (no settings) checks nothing.
func TestI8ChecksOnlyWindowsWithALongEnoughStretch(t *testing.T) {
	b := cleanBooks()
	assert.Equal(t, 2, Run(b)[7].Checked, "o1 and o2; o3 was an operator's cancel")
	b.Unreachable = []Stretch{{From: at(0.5), To: at(45), Why: "pgsim-down"}}
	assert.Equal(t, 0, Run(b)[7].Checked, "o1 had 0.5 s before the outage and 15 s after it, o2 16 s after it")
	b.LongEnough = 16 * time.Second
	assert.Equal(t, 1, Run(b)[7].Checked, "o2's 16 s are long enough now")
	lose(&b, "o2", store.LostCancelled)
	r := Run(b)[7]
	require.Equal(t, 1, r.Violations)
	assert.Equal(t, "order o2 lost (cancelled: CANCELLED, payment FAILED): placed T+1.0s, deadline T+61.0s, the gateway reachable T+45.0s to T+61.0s (16.0s ≥ 16s)", r.Examples[0])
	b.LongEnough = 0
	assert.Zero(t, Run(b)[7].Checked)
}

func TestLongestReachableSkipsEveryCut(t *testing.T) {
	for _, c := range []struct {
		name     string
		cut      []Stretch
		from, to float64
	}{
		{"no cut", nil, 0, 60},
		{"a cut before the window", []Stretch{{From: at(-20), To: at(-5)}}, 0, 60},
		{"a cut over the start", []Stretch{{From: at(-5), To: at(10)}}, 10, 60},
		{"a cut over the end", []Stretch{{From: at(40), To: at(90)}}, 0, 40},
		{"overlapping cuts, unsorted", []Stretch{{From: at(30), To: at(35)}, {From: at(5), To: at(20)}, {From: at(18), To: at(25)}}, 35, 60},
		{"the longest gap between cuts", []Stretch{{From: at(0), To: at(5)}, {From: at(30), To: at(60)}}, 5, 30},
		{"the whole window cut", []Stretch{{From: at(-1), To: at(61)}}, 0, 0},
	} {
		from, to := longestReachable(at(0), at(60), c.cut)
		got := [2]float64{from.Sub(began).Seconds(), to.Sub(began).Seconds()}
		if c.from == c.to {
			assert.Equal(t, 0.0, got[1]-got[0], c.name)
			continue
		}
		assert.Equal(t, [2]float64{c.from, c.to}, got, c.name)
	}
}

// The chaos run's worker settings: a timed-out create's 3 s grace, three
// answered 5xx re-sent after 1, 2 and 3 s (the doubling capped at poll max),
// two 2.5 s calls, the create breaker's 5 s open, a 2 s decision and one
// 3 s poll.
func TestLongEnoughFollowsTheResendSchedule(t *testing.T) {
	tm := Timings{ConnectTimeout: 500 * time.Millisecond, ReadTimeout: 2 * time.Second, UnknownGrace: 3 * time.Second,
		AnsweredGrace: time.Second, PollMax: 3 * time.Second, BreakerOpen: 5 * time.Second, Decision: 2 * time.Second}
	assert.Equal(t, 23*time.Second, LongEnough(tm))
	assert.Equal(t, "23s = 3s unknown grace + 5s 3 re-send cycles + 5s create + lookup timeouts + 5s breaker open + 5s gateway decision + poll max", tm.Explain())
	tm.AnsweredGrace = 2 * time.Second
	assert.Equal(t, 28*time.Second, LongEnough(tm), "2 + 4 + 4 s of re-sends: two graces after the first")
	tm.PollMax = time.Minute
	assert.Equal(t, 3*time.Second+10*time.Second+5*time.Second+5*time.Second+62*time.Second, LongEnough(tm), "the poll's wait does not slow the re-sends")
}
