package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/payguard/payguard/ids"
	"github.com/payguard/payguard/loadgen"
	"github.com/payguard/payguard/orders"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/store"
	"github.com/payguard/payguard/workflows"
)

// OrderAnswer is POST /api/v1/orders's answer: the order's first step.
type OrderAnswer struct {
	OrderID        string         `json:"orderId"`
	Status         status.Order   `json:"status"`
	PaymentStatus  status.Payment `json:"paymentStatus"`
	TransactionKey string         `json:"transactionKey,omitempty"`
}

// OrderPath is an order's URL, the Location of a placed one.
func OrderPath(orderID string) string { return "/api/v1/orders/" + orderID }

// answer is an HTTP answer as kept under an Idempotency-Key.
type answer struct {
	code int
	body []byte
}

func problemAnswer(p Problem) answer {
	body, _ := json.Marshal(p)
	return answer{code: p.Status, body: append(body, '\n')}
}

func (a answer) write(w http.ResponseWriter, orderID string) {
	if a.code >= 400 {
		w.Header().Set("Content-Type", ProblemContentType)
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(a.code)
		_, _ = w.Write(a.body)
		return
	}
	if a.code == http.StatusCreated || a.code == http.StatusOK {
		w.Header().Set("Location", OrderPath(orderID))
	}
	writeBody(w, a.code, a.body)
}

// placeOrder is POST /api/v1/orders: everything is checked before anything
// is reserved, then the order's workflow starts and the answer waits for
// its first step, at most FirstAnswerWait.
func (s *Server) placeOrder(w http.ResponseWriter, r *http.Request) {
	var req OrderRequest
	if p := readJSON(w, r, &req); p != nil {
		writeProblem(w, *p)
		return
	}
	user := r.Header.Get(HeaderUser)
	orderID := req.OrderID
	if orderID == "" {
		orderID = loadgen.NewOrderID()
	}
	in, err := req.input(user, orderID)
	if err != nil {
		writeProblem(w, problem(http.StatusBadRequest, CodeInvalid, err.Error()))
		return
	}
	key, keyed := r.Header.Get(HeaderIdempotencyKey), len(r.Header.Values(HeaderIdempotencyKey)) > 0
	if keyed {
		if err := checkIdempotencyKey(key); err != nil || key == "" {
			if err == nil {
				err = fmt.Errorf("%s is empty", HeaderIdempotencyKey)
			}
			writeProblem(w, problem(http.StatusBadRequest, CodeInvalid, err.Error()))
			return
		}
	}
	ctx := r.Context()
	// An unknown product would end the order REJECTED without a row the
	// first answer could read: refused here, before anything starts (under
	// a key, by the statement that takes it).
	unknownProduct := func() {
		writeProblem(w, problem(http.StatusNotFound, CodeUnknownProduct, fmt.Sprintf("unknown product %q", in.ProductID)))
	}
	if !keyed {
		if _, err := s.store.GetStock(ctx, in.ProductID); errors.Is(err, store.ErrUnknownProduct) {
			unknownProduct()
			return
		} else if err != nil {
			writeProblem(w, s.unavailable("database", err))
			return
		}
		a := s.place(ctx, in, false)
		a.write(w, in.OrderID)
		return
	}
	held, err := s.store.BeginIdempotent(ctx, user, key, req.fingerprint(user), in.OrderID, in.ProductID, s.cfg.FirstAnswerWait+startTimeout+answerMargin)
	if errors.Is(err, store.ErrUnknownProduct) {
		unknownProduct()
		return
	}
	if err != nil {
		writeProblem(w, s.unavailable("database", err))
		return
	}
	switch held.State {
	case store.StateMismatch:
		writeProblem(w, problem(http.StatusUnprocessableEntity, CodeKeyMismatch,
			fmt.Sprintf("%s %q was used for another request: a new request takes a new key", HeaderIdempotencyKey, key)))
		return
	case store.StateInFlight:
		writeProblem(w, problem(http.StatusConflict, CodeKeyInFlight,
			fmt.Sprintf("a request under %s %q is still in flight: retry when it has answered", HeaderIdempotencyKey, key)))
		return
	case store.StateAnswered:
		w.Header().Set(HeaderReplayed, "true")
		code := held.Code
		if code == http.StatusCreated {
			code = http.StatusOK
		}
		answer{code: code, body: held.Answer}.write(w, held.OrderID)
		return
	}
	in.OrderID = held.OrderID
	a := s.place(ctx, in, held.TakenUp)
	// An answer that says nothing of the order (503) is not kept: the
	// next request under the key takes it up and places the same order.
	// The key is released on a context of its own, as the request's may
	// have ended.
	keep, cancel := context.WithTimeout(context.WithoutCancel(ctx), answerMargin)
	defer cancel()
	if a.code >= 500 {
		_ = s.store.ReleaseIdempotent(keep, user, key)
	} else if err := s.store.AnswerIdempotent(keep, user, key, a.code, a.body); err != nil {
		s.log.Error("keep the answer of an idempotency key", "order_id", in.OrderID, "error", err.Error())
	}
	a.write(w, in.OrderID)
}

// startTimeout bounds the workflow's start; answerMargin is what the rest
// of a POST (reading it, the checks, keeping the answer) may take.
const (
	startTimeout = 5 * time.Second
	answerMargin = 5 * time.Second
)

// place starts the order and answers its first step. takenUp says an
// earlier request under the same key may have started it: an order already
// started is then this request's if it was started with this very input.
func (s *Server) place(ctx context.Context, in workflows.PaymentInput, takenUp bool) answer {
	// Watched before the start: the first step cannot be heard before it.
	watch := s.steps.Watch(in.OrderID)
	defer watch.Close()
	startCtx, cancel := context.WithTimeout(ctx, startTimeout)
	_, err := loadgen.StartOrder(startCtx, s.temporal, s.cfg.TaskQueue, in)
	cancel()
	var placed *loadgen.AlreadyPlacedError
	if errors.As(err, &placed) && takenUp {
		same, serr := s.startedWith(ctx, in)
		switch {
		case serr != nil:
			err = serr
		case same:
			err = nil
		}
	}
	switch {
	case errors.As(err, &placed):
		p := problem(http.StatusConflict, CodeAlreadyPlaced, err.Error())
		p.OrderID = in.OrderID
		return problemAnswer(p)
	case err != nil:
		// The start may have reached Temporal all the same: the answer names
		// the order, which a retry under the same orderId or key finds.
		p := s.unavailable("temporal", err)
		p.OrderID = in.OrderID
		p.Detail = fmt.Sprintf("temporal is unavailable; order %s may have been placed: retry with the same orderId or %s, or read it",
			in.OrderID, HeaderIdempotencyKey)
		return problemAnswer(p)
	}
	// An order started before (a key taken up) may have taken its first
	// step already, unheard by this watch: its row is read at once.
	o, found := s.firstStep(ctx, watch, takenUp)
	if o.Status == status.OrderRejected {
		p := problem(http.StatusConflict, CodeOutOfStock, fmt.Sprintf("product %s has fewer than %d available: the order is REJECTED, nothing reserved",
			in.ProductID, in.Quantity))
		p.OrderID, p.OrderStatus = in.OrderID, string(o.Status)
		return problemAnswer(p)
	}
	a := OrderAnswer{OrderID: in.OrderID, Status: o.Status, PaymentStatus: o.PaymentStatus, TransactionKey: o.TransactionKey}
	if !found {
		a.Status = status.OrderReserving
	}
	body, _ := json.Marshal(a)
	return answer{code: http.StatusCreated, body: append(body, '\n')}
}

// Without the listener (its connection down), a new order's row is read
// at most quickPoll apart for its first quickFor (the reservation commits
// some 10–20 ms after the start: make demo-api), then backing off to
// slowPoll: a worker that is slow or down must not turn every waiting
// request into hundreds of reads of the database it needs. While the
// listener listens, the answer is the step it hears, and the row is read
// in case a notification went astray (a pooler that drops LISTEN) first
// after slowPoll, then twice as long apart each time: when first steps
// slow down at the edge of capacity, the waiting requests' reads must not
// add to the load that slows them.
const (
	quickPoll = 4 * time.Millisecond
	quickFor  = 50 * time.Millisecond
	slowPoll  = 100 * time.Millisecond
)

// firstStep waits for the order to leave RESERVING in the database
// (reserved or rejected), at most FirstAnswerWait. The reservation is the
// workflow's first step, a transaction of its own whose commit announces
// the status it moved the order to (store.FirstSteps): that is the answer
// when the listener hears it. When the listener could have missed it (its
// connection down), the row is polled, from a millisecond apart and
// backing off. readNow reads the row before any wait.
func (s *Server) firstStep(ctx context.Context, watch *store.Watch, readNow bool) (store.Order, bool) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.FirstAnswerWait)
	defer cancel()
	var last store.Order
	found := false
	began := time.Now()
	poll := time.Millisecond // the next wait between reads, without the listener
	astray := slowPoll       // the next wait between reads, beside the listener
	for {
		if readNow || !watch.Listening() {
			s.Metrics.firstStepReads.Inc()
			o, err := s.store.GetOrder(ctx, watch.OrderID())
			if err == nil {
				last, found = o, true
				if o.Status != status.OrderReserving {
					s.Metrics.firstAnswers.WithLabelValues(ViaRead).Inc()
					return o, true
				}
			}
		}
		var wait time.Duration
		if watch.Listening() {
			wait, astray = astray, 2*astray
		} else {
			wait = poll
			if time.Since(began) < quickFor {
				poll = min(2*poll, quickPoll)
			} else {
				poll = min(2*poll, slowPoll)
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			s.Metrics.firstAnswers.WithLabelValues(ViaTimeout).Inc()
			return last, found
		case <-watch.Woken:
			t.Stop()
			// Heard at the commit: the answer is the step announced, with
			// no read (the row may have moved on since; the step is what
			// the first answer tells).
			if to := watch.Heard(); to != "" && to != status.OrderReserving {
				s.Metrics.firstAnswers.WithLabelValues(ViaNotification).Inc()
				return store.Order{OrderID: watch.OrderID(), Status: to}, true
			}
			readNow = true
		case <-t.C:
			readNow = true
		}
	}
}

// getOrder is GET /api/v1/orders/{orderId}: the order as `starter status`
// shows it.
func (s *Server) getOrder(w http.ResponseWriter, r *http.Request) {
	orderID := r.PathValue("orderId")
	if err := ids.CheckOrder(orderID); err != nil {
		writeProblem(w, problem(http.StatusBadRequest, CodeInvalid, err.Error()))
		return
	}
	v := orders.Read(r.Context(), s.temporal, s.store, orderID)
	if !v.Found() {
		if v.Unreachable() {
			writeProblem(w, problem(http.StatusServiceUnavailable, CodeUnavailable,
				fmt.Sprintf("neither Temporal nor PostgreSQL is reachable (%s; %s)", v.Sources["workflow"], v.Sources["database"])))
			return
		}
		writeProblem(w, problem(http.StatusNotFound, CodeNotFound,
			fmt.Sprintf("unknown order %q (workflow: %s; database: %s)", orderID, v.Sources["workflow"], v.Sources["database"])))
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// cancelOrder is POST /api/v1/orders/{orderId}/cancel, the operator's
// cancel: it is asked for and answered 202 with the order as it stands;
// the compensation goes on in the workflow.
func (s *Server) cancelOrder(w http.ResponseWriter, r *http.Request) {
	orderID := r.PathValue("orderId")
	if err := ids.CheckOrder(orderID); err != nil {
		writeProblem(w, problem(http.StatusBadRequest, CodeInvalid, err.Error()))
		return
	}
	ctx := r.Context()
	view := func(ctx context.Context) orders.View { return orders.Read(ctx, s.temporal, s.store, orderID) }
	err := orders.Cancel(ctx, s.temporal, orderID, false, view)
	var ended *orders.EndedError
	switch {
	case errors.Is(err, orders.ErrUnknownOrder):
		writeProblem(w, problem(http.StatusNotFound, CodeNotFound, err.Error()))
	case errors.As(err, &ended):
		p := problem(http.StatusConflict, CodeAlreadyEnded, err.Error())
		p.OrderID, p.OrderStatus = orderID, string(ended.Status)
		writeProblem(w, p)
	case err != nil:
		writeProblem(w, s.unavailable("temporal", err))
	default:
		writeJSON(w, http.StatusAccepted, view(ctx))
	}
}

// refundOrder is POST /api/v1/orders/{orderId}/refund: a CONFIRMED order
// refunded in full at the gateway and its stock returned, once
// (orders.Refund); answered 202 with the order as it stands.
func (s *Server) refundOrder(w http.ResponseWriter, r *http.Request) {
	orderID := r.PathValue("orderId")
	if err := ids.CheckOrder(orderID); err != nil {
		writeProblem(w, problem(http.StatusBadRequest, CodeInvalid, err.Error()))
		return
	}
	ctx := r.Context()
	_, err := orders.Refund(ctx, s.temporal, s.store, s.cfg.TaskQueue, orderID, false)
	var not *orders.NotRefundableError
	switch {
	case errors.Is(err, orders.ErrUnknownOrder):
		writeProblem(w, problem(http.StatusNotFound, CodeNotFound, err.Error()))
	case errors.As(err, &not):
		p := problem(http.StatusConflict, CodeNotRefundable, err.Error())
		p.OrderID, p.OrderStatus = orderID, string(not.Status)
		writeProblem(w, p)
	case err != nil:
		writeProblem(w, s.unavailable("temporal", err))
	default:
		writeJSON(w, http.StatusAccepted, orders.Read(ctx, s.temporal, s.store, orderID))
	}
}

// unavailable is the 503 of a dependency that failed; the detail names it
// without its error's internals, which go to the log.
func (s *Server) unavailable(what string, err error) Problem {
	s.log.Error("dependency failed", "dependency", what, "error", err.Error())
	return problem(http.StatusServiceUnavailable, CodeUnavailable, fmt.Sprintf("%s is unavailable: retry later", what))
}

// startedWith reports whether the order's workflow was started with in
// (its first event's input, decoded with the client's codec): a key taken
// up owns an order already started only then.
func (s *Server) startedWith(ctx context.Context, in workflows.PaymentInput) (bool, error) {
	iter := s.temporal.GetWorkflowHistory(ctx, workflows.PaymentWorkflowID(in.OrderID), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !iter.HasNext() {
		return false, errors.New("the order's workflow has no history")
	}
	first, err := iter.Next()
	if err != nil {
		return false, err
	}
	attrs := first.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil {
		return false, errors.New("the order's history does not begin with its start")
	}
	var got workflows.PaymentInput
	if err := s.dataConverter.FromPayloads(attrs.GetInput(), &got); err != nil {
		return false, err
	}
	return got == in, nil
}
