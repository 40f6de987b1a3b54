package gateway

// The wire format: every answer of the gateway API, success or failure, is
// one envelope, as the Loopers PG simulator's API document defines it, so a
// service written against that document can point at pgsim and this client
// can point at that simulator. payguard's own types (Transaction, Created,
// OrderTransactions) stay as they were: they travel in workflow histories,
// and the client converts at the edge.

// Meta.Result values.
const (
	ResultSuccess = "SUCCESS"
	ResultFail    = "FAIL"
)

// Error codes in Meta.ErrorCode. The first three are the simulator's; the
// rest are payguard's extensions, in the same envelope.
const (
	CodeBadRequest       = "BAD_REQUEST"
	CodeNotFound         = "NOT_FOUND"
	CodeInternalError    = "INTERNAL_ERROR" // also every injected instability
	CodeMethodNotAllowed = "METHOD_NOT_ALLOWED"
	CodePayloadTooLarge  = "PAYLOAD_TOO_LARGE"
	CodeKeyReused        = "IDEMPOTENCY_KEY_REUSED"        // 422
	CodeKeyInFlight      = "IDEMPOTENT_REQUEST_PROCESSING" // 409
)

// Meta says how a call went; ErrorCode and Message are null on success.
type Meta struct {
	Result    string  `json:"result"`
	ErrorCode *string `json:"errorCode"`
	Message   *string `json:"message"`
}

// Envelope is the body of every answer; Data is null on failure.
type Envelope struct {
	Meta Meta `json:"meta"`
	Data any  `json:"data"`
}

// Success wraps an answer's data.
func Success(data any) Envelope { return Envelope{Meta: Meta{Result: ResultSuccess}, Data: data} }

// Failure is an error answer.
func Failure(code, message string) Envelope {
	return Envelope{Meta: Meta{Result: ResultFail, ErrorCode: &code, Message: &message}}
}

// Nullable is s, or null when s is empty: the document writes an absent
// reason as null, never "".
func Nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// TransactionSummary is the data of a create's answer and one line of a
// lookup by order.
type TransactionSummary struct {
	TransactionKey string  `json:"transactionKey"`
	Status         string  `json:"status"`
	Reason         *string `json:"reason"`
}

// TransactionInfo is the data of a lookup by key, and the callback body.
type TransactionInfo struct {
	TransactionKey string  `json:"transactionKey"`
	OrderID        string  `json:"orderId"`
	CardType       string  `json:"cardType"`
	CardNo         string  `json:"cardNo"`
	Amount         int64   `json:"amount"`
	Status         string  `json:"status"`
	Reason         *string `json:"reason"`
}

// OrderInfo is the data of a lookup by order.
type OrderInfo struct {
	OrderID      string               `json:"orderId"`
	Transactions []TransactionSummary `json:"transactions"`
}

// Transaction is payguard's view of a transaction the gateway described.
func (t TransactionInfo) Transaction() Transaction {
	return Transaction{TransactionKey: t.TransactionKey, OrderID: t.OrderID, Amount: t.Amount, Status: t.Status, Reason: deref(t.Reason)}
}

// OrderTransactions is payguard's view of a lookup by order. The document's
// lines carry neither order id nor amount: each line is the order's, so it
// takes the answer's orderId (a gateway answering for another order is still
// caught by the workflow), and Amount stays 0.
func (o OrderInfo) OrderTransactions() OrderTransactions {
	out := OrderTransactions{OrderID: o.OrderID, Transactions: make([]Transaction, 0, len(o.Transactions))}
	for _, t := range o.Transactions {
		out.Transactions = append(out.Transactions, Transaction{TransactionKey: t.TransactionKey, OrderID: o.OrderID,
			Status: t.Status, Reason: deref(t.Reason)})
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
