// Package check is the chaos run's referee: it reads nothing itself, it is
// handed the three books a run leaves — PostgreSQL's, the gateway's and
// Temporal's — and says, invariant by invariant, where they disagree with
// payguard's promise that money and stock stay correct whatever fails.
// Keeping it pure makes it testable on hand-made books with known
// violations, so a clean report means something.
package check

import (
	"time"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
)

// Books are everything the checker looks at, keyed by order id.
type Books struct {
	// Launched are the orders whose workflow the load (or the run) started.
	Launched []string
	// Orders and Products are PostgreSQL's book.
	Orders   map[string]store.Order
	Products map[string]store.Stock
	// Gateway is pgsim's book: what reached it per order.
	Gateway map[string]GatewayOrder
	// Workflows is Temporal's book, per order id.
	Workflows map[string]Workflow
	// StillRunning are workflow ids (payments and refunds) open at the end.
	StillRunning []string
	// Forged are the callbacks the run forged and what the worker answered.
	Forged []Forged
	// Replays are the replay outcomes of closed workflows: id → error ("" ok).
	Replays map[string]string
	// Outcomes are how the orders ended by the database's account
	// (store.Outcomes, which defines a lost order), by order id.
	Outcomes map[string]store.Outcome
	// BeganAt is time zero of the run's offsets.
	BeganAt time.Time
	// Unreachable are the stretches the gateway was not reachable as usual.
	Unreachable []Stretch
	// LongEnough is I8's bound (LongEnough of the run's Timings); 0 checks
	// nothing.
	LongEnough time.Duration
}

// GatewayOrder is one order as pgsim saw it.
type GatewayOrder struct {
	CreateRequests int `json:"createRequests"`
	// CreatedThen500 counts its creates that made a transaction and
	// answered 500 (pgsim's create.createdThen500Rate).
	CreatedThen500 int                   `json:"createdThen500,omitempty"`
	Transactions   []gateway.Transaction `json:"transactions"`
}

// Workflow is one payment workflow as Temporal holds it.
type Workflow struct {
	// Status is the execution status: Running, Completed, Canceled, Failed, ...
	Status string `json:"status"`
	// Result is the returned State's status (Completed runs only).
	Result status.Order `json:"result,omitempty"`
	// SearchStatus is the OrderStatus search attribute at the close.
	SearchStatus string `json:"searchStatus,omitempty"`
}

// Execution statuses as the checker names them (the API's enum, short).
const (
	WorkflowRunning   = "Running"
	WorkflowCompleted = "Completed"
	WorkflowCanceled  = "Canceled"
)

// Forged is one forged, stale or malformed callback sent to a worker.
type Forged struct {
	Kind           string `json:"kind"` // bad-signature, stale, malformed, unknown-order
	OrderID        string `json:"orderId"`
	TransactionKey string `json:"transactionKey"`
	Code           int    `json:"code"` // the worker's HTTP answer; 0 when it could not be sent
}

// successes counts the order's transactions that hold the customer's money.
func (g GatewayOrder) successes() int {
	n := 0
	for _, tx := range g.Transactions {
		if tx.Status == gateway.StatusSuccess {
			n++
		}
	}
	return n
}

func (g GatewayOrder) find(key string) (gateway.Transaction, bool) {
	for _, tx := range g.Transactions {
		if tx.TransactionKey == key {
			return tx, true
		}
	}
	return gateway.Transaction{}, false
}
