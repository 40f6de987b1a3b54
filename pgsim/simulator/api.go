package simulator

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/ids"
)

// maxBody bounds every request body the simulator reads.
const maxBody = 64 << 10

var cardNoPattern = regexp.MustCompile(`^\d{4}-\d{4}-\d{4}-\d{4}$`)

func (s *Server) gatewayHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/payments", byMethod(map[string]http.HandlerFunc{
		http.MethodPost: s.counted("create", s.handleCreate),
		http.MethodGet:  s.counted("lookup", s.handleLookupByOrder),
	}))
	mux.HandleFunc("/api/v1/payments/{key}", byMethod(map[string]http.HandlerFunc{http.MethodGet: s.counted("lookup", s.handleLookup)}))
	mux.HandleFunc("/api/v1/payments/{key}/cancel", byMethod(map[string]http.HandlerFunc{http.MethodPost: s.counted("cancel", s.handleCancel)}))
	mux.HandleFunc("/", notFound)
	return mux
}

func notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
}

// byMethod dispatches on the method and answers any other with a JSON 405,
// where ServeMux's own would be plain text.
func byMethod(handlers map[string]http.HandlerFunc) http.HandlerFunc {
	allowed := make([]string, 0, len(handlers))
	for m := range handlers {
		allowed = append(allowed, m)
	}
	slices.Sort(allowed)
	return func(w http.ResponseWriter, r *http.Request) {
		if h, ok := handlers[r.Method]; ok {
			h(w, r)
			return
		}
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		writeError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, strings.Join(allowed, " or ")))
	}
}

// counted counts every request an endpoint receives, whatever its answer.
func (s *Server) counted(endpoint string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.calls[endpoint]++
		s.mu.Unlock()
		h(w, r)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, gateway.ErrorBody{Code: code, Message: message})
}

// readBody reads at most maxBody bytes; it answers the error itself.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		writeError(w, http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE", fmt.Sprintf("body over %d bytes", maxBody))
		return nil, false
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "BAD_REQUEST", "cannot read body: "+err.Error())
		return nil, false
	}
	return raw, true
}

// decodeStrict decodes exactly one JSON object with no unknown fields.
func decodeStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return fmt.Errorf("field %q must be %s", typeErr.Field, typeErr.Type)
		}
		if errors.Is(err, io.EOF) {
			return errors.New("empty body: a JSON object is required")
		}
		return fmt.Errorf("malformed JSON: %v", err)
	}
	if dec.More() {
		return errors.New("malformed JSON: trailing data after the object")
	}
	return nil
}

// validateCreate checks a create body as the Loopers simulator does, with
// orderId held to payguard's id rule (package ids) like every other id.
func validateCreate(req gateway.CreateRequest) error {
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
	if !slices.Contains(gateway.CardTypes, req.CardType) {
		return fmt.Errorf("cardType must be one of %s, got %q", strings.Join(gateway.CardTypes, ", "), req.CardType)
	}
	if !cardNoPattern.MatchString(req.CardNo) {
		return fmt.Errorf("cardNo must look like dddd-dddd-dddd-dddd, got %q", req.CardNo)
	}
	if err := ids.CheckOrder(req.OrderID); err != nil {
		return err
	}
	if !strings.HasPrefix(req.CallbackURL, "http://") && !strings.HasPrefix(req.CallbackURL, "https://") {
		return fmt.Errorf("callbackUrl must be an http(s) URL, got %q", req.CallbackURL)
	}
	return nil
}

// injectedError decides, before anything is done, whether this call fails.
// Called with s.mu held.
func (s *Server) injectedError(f *EndpointFaults) (int, bool) {
	if f.FailNext > 0 {
		f.FailNext--
		return f.ErrorStatus, true
	}
	if s.chance(f.ErrorRate) {
		return f.ErrorStatus, true
	}
	return 0, false
}

func writeInjected(w http.ResponseWriter, status int) {
	writeError(w, status, "INJECTED_FAULT", "pgsim injected this error")
}

// latency waits the configured answer latency.
func (s *Server) latency(ctx context.Context) bool {
	s.mu.Lock()
	d := s.between(s.faults.Latency.Min, s.faults.Latency.Max)
	s.mu.Unlock()
	return sleep(ctx, d)
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	raw, ok := readBody(w, r)
	if !ok {
		return
	}
	userID := r.Header.Get("X-USER-ID")
	if userID == "" {
		writeError(w, http.StatusBadRequest, "BAD_REQUEST", "header X-USER-ID is required")
		return
	}
	if err := ids.CheckUser(userID); err != nil {
		writeError(w, http.StatusBadRequest, "BAD_REQUEST", "header X-USER-ID: "+err.Error())
		return
	}
	var req gateway.CreateRequest
	if err := decodeStrict(raw, &req); err != nil {
		writeError(w, http.StatusBadRequest, "BAD_REQUEST", err.Error())
		return
	}
	if err := validateCreate(req); err != nil {
		writeError(w, http.StatusBadRequest, "BAD_REQUEST", err.Error())
		return
	}
	idemKey := r.Header.Get("Idempotency-Key")
	if len(idemKey) > 256 {
		writeError(w, http.StatusBadRequest, "BAD_REQUEST", "Idempotency-Key longer than 256 characters")
		return
	}
	hash := sha256.Sum256(append([]byte(userID+"\x00"), raw...))

	s.mu.Lock()
	s.statsFor(req.OrderID).createRequests++
	if status, fail := s.injectedError(&s.faults.Create); fail {
		s.mu.Unlock()
		writeInjected(w, status)
		return
	}
	var entry *idemEntry
	if s.cfg.Idempotency && idemKey != "" {
		if e, ok := s.idem[idemKey]; ok && time.Since(e.createdAt) > s.cfg.IdempotencyTTL {
			delete(s.idem, idemKey)
		}
		if found, ok := s.idem[idemKey]; ok {
			e := *found // the first request may still be filling it in
			s.mu.Unlock()
			switch {
			case e.bodyHash != hash:
				writeError(w, http.StatusUnprocessableEntity, "IDEMPOTENCY_KEY_REUSED", "Idempotency-Key was used with another request body")
			case !e.done:
				writeError(w, http.StatusConflict, "IDEMPOTENT_REQUEST_PROCESSING", "a request with this Idempotency-Key is in flight")
			default:
				w.Header().Set("Idempotent-Replayed", "true")
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(e.status)
				_, _ = w.Write(e.body)
			}
			return
		}
		entry = &idemEntry{bodyHash: hash, createdAt: time.Now()}
		s.idem[idemKey] = entry
	}
	tx := s.newTransaction(req)
	timeout := s.chance(s.faults.Create.TimeoutRate)
	timeoutDelay := time.Duration(s.faults.Create.TimeoutDelay)
	s.mu.Unlock()

	s.latency(r.Context())
	answer := gateway.Created{TransactionKey: tx.Key, OrderID: tx.OrderID, Status: gateway.StatusPending}
	body, _ := json.Marshal(answer)
	if entry != nil {
		s.mu.Lock()
		entry.done, entry.status, entry.body = true, http.StatusCreated, append(body, '\n')
		s.mu.Unlock()
	}
	if timeout && !sleep(r.Context(), timeoutDelay) {
		return
	}
	writeJSON(w, http.StatusCreated, answer)
}

// newTransaction stores a PENDING transaction and schedules its processing.
// Called with s.mu held.
func (s *Server) newTransaction(req gateway.CreateRequest) *transaction {
	now := time.Now()
	var key string
	for {
		key = fmt.Sprintf("%s:TR:%06x", now.Format("20060102"), s.rng.IntN(1<<24))
		if _, taken := s.txs[key]; !taken {
			break
		}
	}
	tx := &transaction{Key: key, OrderID: req.OrderID, Amount: req.Amount, CardType: req.CardType, CardNo: req.CardNo,
		CallbackURL: req.CallbackURL, Status: gateway.StatusPending, CreatedAt: now}
	s.txs[key] = tx
	st := s.statsFor(req.OrderID)
	st.keys = append(st.keys, key)
	delay := s.between(s.faults.Processing.Min, s.faults.Processing.Max)
	s.goBackground(func(ctx context.Context) {
		if !sleep(ctx, delay) {
			return
		}
		s.mu.Lock()
		if s.txs[key] != tx || tx.Status != gateway.StatusPending {
			s.mu.Unlock()
			return
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
		snapshot := tx.view()
		s.mu.Unlock()
		s.sendCallback(snapshot, tx.CallbackURL)
	})
	return tx
}

func (tx *transaction) view() gateway.Transaction {
	return gateway.Transaction{TransactionKey: tx.Key, OrderID: tx.OrderID, Amount: tx.Amount, Status: tx.Status, Reason: tx.Reason}
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

// endpointCall applies latency and the endpoint's faults; it reports whether
// the handler should go on, and how long to hold the answer.
func (s *Server) endpointCall(w http.ResponseWriter, r *http.Request, faults func(*Faults) *EndpointFaults) (time.Duration, bool) {
	s.mu.Lock()
	f := faults(&s.faults)
	status, fail := s.injectedError(f)
	var holdFor time.Duration
	if !fail && s.chance(f.TimeoutRate) {
		holdFor = time.Duration(f.TimeoutDelay)
	}
	s.mu.Unlock()
	if !s.latency(r.Context()) {
		return 0, false
	}
	if fail {
		writeInjected(w, status)
		return 0, false
	}
	return holdFor, true
}

func (s *Server) handleLookup(w http.ResponseWriter, r *http.Request) {
	holdFor, ok := s.endpointCall(w, r, func(f *Faults) *EndpointFaults { return &f.Lookup })
	if !ok {
		return
	}
	s.answerTransaction(w, r, holdFor, func(*transaction) {})
}

// answerTransaction applies change to the transaction named in the path
// (under the lock) and answers with what it became, after holding the answer
// for a timeout fault; an unknown key is a 404.
func (s *Server) answerTransaction(w http.ResponseWriter, r *http.Request, holdFor time.Duration, change func(*transaction)) {
	key := r.PathValue("key")
	s.mu.Lock()
	tx, found := s.txs[key]
	var view gateway.Transaction
	if found {
		change(tx)
		view = tx.view()
	}
	s.mu.Unlock()
	if holdFor > 0 && !sleep(r.Context(), holdFor) {
		return
	}
	if !found {
		writeError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("no transaction %q", key))
		return
	}
	writeJSON(w, http.StatusOK, view)
}

func (s *Server) handleLookupByOrder(w http.ResponseWriter, r *http.Request) {
	orderID := r.URL.Query().Get("orderId")
	if orderID == "" {
		writeError(w, http.StatusBadRequest, "BAD_REQUEST", "query parameter orderId is required")
		return
	}
	if err := ids.CheckOrder(orderID); err != nil {
		writeError(w, http.StatusBadRequest, "BAD_REQUEST", "query parameter orderId: "+err.Error())
		return
	}
	holdFor, ok := s.endpointCall(w, r, func(f *Faults) *EndpointFaults { return &f.Lookup })
	if !ok {
		return
	}
	out := gateway.OrderTransactions{OrderID: orderID, Transactions: []gateway.Transaction{}}
	s.mu.Lock()
	if st, ok := s.orders[orderID]; ok {
		for _, key := range st.keys {
			out.Transactions = append(out.Transactions, s.txs[key].view())
		}
	}
	s.mu.Unlock()
	if holdFor > 0 && !sleep(r.Context(), holdFor) {
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request) {
	holdFor, ok := s.endpointCall(w, r, func(f *Faults) *EndpointFaults { return &f.Cancel })
	if !ok {
		return
	}
	s.answerTransaction(w, r, holdFor, func(tx *transaction) {
		switch tx.Status {
		case gateway.StatusPending:
			tx.Status, tx.Reason = gateway.StatusCancelled, "CANCELLED"
		case gateway.StatusSuccess:
			tx.Status, tx.Reason, tx.Refunded = gateway.StatusCancelled, "REFUNDED", true
		}
	})
}
