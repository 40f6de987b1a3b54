package simulator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/payguard/payguard/gateway"
	"github.com/payguard/payguard/ids"
)

// maxBody bounds every request body the simulator reads.
const maxBody = 64 << 10

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
	writeError(w, http.StatusNotFound, gateway.CodeNotFound, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
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
		writeError(w, http.StatusMethodNotAllowed, gateway.CodeMethodNotAllowed, fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, strings.Join(allowed, " or ")))
	}
}

// counted counts every request an endpoint receives, whatever its answer.
func (s *Server) counted(endpoint string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.locked(func() { s.calls[endpoint]++ })
		h(w, r)
	}
}

// writeJSON answers data inside the envelope, as every answer of both APIs.
func writeJSON(w http.ResponseWriter, status int, data any) {
	writeEnvelope(w, status, gateway.Success(data))
}

// writeError answers a failure: the envelope with data null.
func writeError(w http.ResponseWriter, status int, code, message string) {
	writeEnvelope(w, status, gateway.Failure(code, message))
}

func writeEnvelope(w http.ResponseWriter, status int, env gateway.Envelope) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(env)
}

// readBody reads at most maxBody bytes; it answers the error itself.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		writeError(w, http.StatusRequestEntityTooLarge, gateway.CodePayloadTooLarge, fmt.Sprintf("body over %d bytes", maxBody))
		return nil, false
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, gateway.CodeBadRequest, "cannot read body: "+err.Error())
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

// writeInjected answers an injected instability as the simulator does:
// INTERNAL_ERROR, whatever status the faults chose.
func writeInjected(w http.ResponseWriter, status int) {
	writeError(w, status, gateway.CodeInternalError, "pgsim injected this error: the gateway is unstable, try again later")
}

// endpointCall applies latency and the endpoint's faults; it reports whether
// the handler should go on, and how long to hold the answer.
func (s *Server) endpointCall(w http.ResponseWriter, r *http.Request, faults func(*Faults) *EndpointFaults) (time.Duration, bool) {
	var status int
	var fail bool
	var holdFor time.Duration
	s.locked(func() {
		f := faults(&s.faults)
		status, fail = s.injectedError(f)
		if !fail && s.chance(f.TimeoutRate) {
			holdFor = time.Duration(f.TimeoutDelay)
		}
	})
	if !s.latency(r) {
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
	var view gateway.TransactionInfo
	var found bool
	s.locked(func() {
		var tx *transaction
		if tx, found = s.txs[key]; found {
			change(tx)
			view = tx.view()
		}
	})
	if holdFor > 0 && !sleep(r.Context(), holdFor) {
		return
	}
	if !found {
		writeError(w, http.StatusNotFound, gateway.CodeNotFound, fmt.Sprintf("no transaction %q", key))
		return
	}
	writeJSON(w, http.StatusOK, view)
}

func (s *Server) handleLookupByOrder(w http.ResponseWriter, r *http.Request) {
	orderID := r.URL.Query().Get("orderId")
	if orderID == "" {
		writeError(w, http.StatusBadRequest, gateway.CodeBadRequest, "query parameter orderId is required")
		return
	}
	if err := ids.CheckOrder(orderID); err != nil {
		writeError(w, http.StatusBadRequest, gateway.CodeBadRequest, "query parameter orderId: "+err.Error())
		return
	}
	holdFor, ok := s.endpointCall(w, r, func(f *Faults) *EndpointFaults { return &f.Lookup })
	if !ok {
		return
	}
	out := gateway.OrderInfo{OrderID: orderID, Transactions: []gateway.TransactionSummary{}}
	s.locked(func() {
		if st, ok := s.orders[orderID]; ok {
			for _, key := range st.keys {
				out.Transactions = append(out.Transactions, s.txs[key].summary())
			}
		}
	})
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
