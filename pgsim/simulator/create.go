package simulator

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/ids"
)

// validateCreate checks a create body as the Loopers simulator does, with
// orderId also held to payguard's id rule (package ids) like every other id.
// A non-empty callbackPrefix is the simulator's callbackUrl rule.
func validateCreate(req gateway.CreateRequest, callbackPrefix string) error {
	var missing []string
	if req.OrderID == "" {
		missing = append(missing, "orderId")
	}
	if req.CardType == "" {
		missing = append(missing, "cardType")
	}
	if req.CardNo == "" {
		missing = append(missing, "cardNo")
	}
	if req.CallbackURL == "" {
		missing = append(missing, "callbackUrl")
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing field(s): %s", strings.Join(missing, ", "))
	}
	if req.Amount <= 0 {
		return fmt.Errorf("amount must be positive, got %d", req.Amount)
	}
	if err := gateway.CheckCard(req.CardType, req.CardNo); err != nil {
		return err
	}
	if err := ids.CheckNewOrder(req.OrderID); err != nil {
		return err
	}
	if !strings.HasPrefix(req.CallbackURL, "http://") && !strings.HasPrefix(req.CallbackURL, "https://") {
		return fmt.Errorf("callbackUrl must be an http(s) URL, got %q", req.CallbackURL)
	}
	if !strings.HasPrefix(req.CallbackURL, callbackPrefix) {
		return fmt.Errorf("callbackUrl must start with %s, got %q", callbackPrefix, req.CallbackURL)
	}
	return nil
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	raw, ok := readBody(w, r)
	if !ok {
		return
	}
	userID := r.Header.Get("X-USER-ID")
	if userID == "" {
		writeError(w, http.StatusBadRequest, gateway.CodeBadRequest, "header X-USER-ID is required")
		return
	}
	if err := ids.CheckUser(userID); err != nil {
		writeError(w, http.StatusBadRequest, gateway.CodeBadRequest, "header X-USER-ID: "+err.Error())
		return
	}
	var req gateway.CreateRequest
	if err := decodeStrict(raw, &req); err != nil {
		writeError(w, http.StatusBadRequest, gateway.CodeBadRequest, err.Error())
		return
	}
	if err := validateCreate(req, s.cfg.CallbackURLPrefix); err != nil {
		writeError(w, http.StatusBadRequest, gateway.CodeBadRequest, err.Error())
		return
	}
	idemKey := r.Header.Get("Idempotency-Key")
	if len(idemKey) > 256 {
		writeError(w, http.StatusBadRequest, gateway.CodeBadRequest, "Idempotency-Key longer than 256 characters")
		return
	}
	hash := sha256.Sum256(append([]byte(userID+"\x00"), raw...))

	plan := s.planCreate(req, idemKey, hash, trace.SpanContextFromContext(r.Context()))
	switch e := plan.replay; {
	case plan.injected != 0:
		writeInjected(w, plan.injected)
		return
	case e == nil:
	case e.bodyHash != hash:
		writeError(w, http.StatusUnprocessableEntity, gateway.CodeKeyReused, "Idempotency-Key was used with another request body")
		return
	case !e.done:
		writeError(w, http.StatusConflict, gateway.CodeKeyInFlight, "a request with this Idempotency-Key is in flight")
		return
	default:
		w.Header().Set("Idempotent-Replayed", "true")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(e.status)
		_, _ = w.Write(e.body)
		return
	}

	// The latency runs while the key's entry is still in flight: a second
	// request with the key meanwhile is the 409 the document's clients retry.
	s.latency(r)
	answer := gateway.TransactionSummary{TransactionKey: plan.key, Status: gateway.StatusPending}
	body, _ := json.Marshal(gateway.Success(answer))
	if plan.entry != nil {
		s.locked(func() {
			plan.entry.done, plan.entry.status, plan.entry.body = true, http.StatusOK, append(body, '\n')
		})
	}
	if plan.answer500 {
		writeError(w, http.StatusInternalServerError, gateway.CodeInternalError,
			"pgsim injected this error after creating the transaction: the gateway is unstable, try again later")
		return
	}
	if plan.holdFor > 0 && !sleep(r.Context(), plan.holdFor) {
		return
	}
	writeJSON(w, http.StatusOK, answer)
}

// createPlan is what one create does, decided under s.mu; the handler acts
// on it (waits, answers) once the lock is released.
type createPlan struct {
	injected int           // an injected error status: nothing was done
	replay   *idemEntry    // a copy of the entry an earlier request with this key made
	entry    *idemEntry    // this request's own entry, completed when it is answered
	key      string        // the new transaction's key
	holdFor  time.Duration // a timeout fault's hold of the answer
	// answer500: the transaction was created, and the answer is a 500
	// all the same. A key's entry keeps the 200: the key's next request
	// replays what the gateway did.
	answer500 bool
}

func (s *Server) planCreate(req gateway.CreateRequest, idemKey string, hash [32]byte, sc trace.SpanContext) createPlan {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.statsFor(req.OrderID).createRequests++
	if status, fail := s.injectedError(&s.faults.Create.EndpointFaults); fail {
		return createPlan{injected: status}
	}
	var p createPlan
	if s.cfg.Idempotency && idemKey != "" {
		if e, ok := s.idem[idemKey]; ok && time.Since(e.createdAt) > s.cfg.IdempotencyTTL {
			delete(s.idem, idemKey)
		}
		if found, ok := s.idem[idemKey]; ok {
			e := *found // the first request may still be filling it in
			return createPlan{replay: &e}
		}
		p.entry = &idemEntry{bodyHash: hash, createdAt: time.Now()}
		s.idem[idemKey] = p.entry
	}
	p.key = s.newTransaction(req, sc).Key
	switch {
	case s.chance(s.faults.Create.CreatedThen500Rate):
		p.answer500 = true
		s.statsFor(req.OrderID).createdThen500++
	case s.chance(s.faults.Create.TimeoutRate):
		p.holdFor = time.Duration(s.faults.Create.TimeoutDelay)
	}
	return p
}

// newTransaction stores a PENDING transaction and schedules its processing.
// sc is the create's trace, which its callbacks continue. Called with s.mu held.
func (s *Server) newTransaction(req gateway.CreateRequest, sc trace.SpanContext) *transaction {
	now := time.Now()
	var key string
	for {
		key = fmt.Sprintf("%s:TR:%06x", now.Format("20060102"), s.rng.IntN(1<<24))
		if _, taken := s.txs[key]; !taken {
			break
		}
	}
	tx := &transaction{Key: key, OrderID: req.OrderID, Amount: req.Amount, CardType: req.CardType, CardNo: req.CardNo,
		CallbackURL: req.CallbackURL, Status: gateway.StatusPending, CreatedAt: now, trace: sc}
	s.txs[key] = tx
	st := s.statsFor(req.OrderID)
	st.keys = append(st.keys, key)
	delay := s.between(s.faults.Processing.Min, s.faults.Processing.Max)
	s.goBackground(func(ctx context.Context) {
		if !sleep(ctx, delay) {
			return
		}
		if view, decided := s.decide(tx); decided {
			s.sendCallback(view, tx.CallbackURL, tx.trace)
		}
	})
	return tx
}

// decide settles a transaction still PENDING (and not forgotten by a reset)
// by the processing success rate.
func (s *Server) decide(tx *transaction) (gateway.TransactionInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.txs[tx.Key] != tx || tx.Status != gateway.StatusPending {
		return gateway.TransactionInfo{}, false
	}
	if s.chance(s.faults.Processing.SuccessRate) {
		tx.Status = gateway.StatusSuccess
	} else {
		tx.Status = gateway.StatusFailed
		// LIMIT_EXCEEDED 20% and INVALID_CARD 10% of all: 2 to 1 among failures.
		tx.Reason = "LIMIT_EXCEEDED"
		if s.rng.IntN(3) == 0 {
			tx.Reason = "INVALID_CARD"
		}
	}
	return tx.view(), true
}

// view is the transaction as a lookup by key and a callback show it.
func (tx *transaction) view() gateway.TransactionInfo {
	return gateway.TransactionInfo{TransactionKey: tx.Key, OrderID: tx.OrderID, CardType: tx.CardType, CardNo: tx.CardNo,
		Amount: tx.Amount, Status: tx.Status, Reason: gateway.Nullable(tx.Reason)}
}

// summary is the transaction as a line of a lookup by order.
func (tx *transaction) summary() gateway.TransactionSummary {
	return gateway.TransactionSummary{TransactionKey: tx.Key, Status: tx.Status, Reason: gateway.Nullable(tx.Reason)}
}

// statsFor returns an order's counters. Called with s.mu held.
func (s *Server) statsFor(orderID string) *orderStats {
	st, ok := s.orders[orderID]
	if !ok {
		st = &orderStats{}
		s.orders[orderID] = st
	}
	return st
}
