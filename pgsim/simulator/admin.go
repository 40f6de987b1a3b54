package simulator

import (
	"fmt"
	"net/http"
	"slices"

	"go.opentelemetry.io/otel/trace"

	"github.com/payguard/payguard/gateway"
)

func (s *Server) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/admin/faults", byMethod(map[string]http.HandlerFunc{http.MethodGet: s.handleGetFaults, http.MethodPatch: s.handlePatchFaults}))
	mux.HandleFunc("/admin/transactions/{key}/resolve", byMethod(map[string]http.HandlerFunc{http.MethodPost: s.handleResolve}))
	mux.HandleFunc("/admin/stats", byMethod(map[string]http.HandlerFunc{http.MethodGet: s.handleStats}))
	mux.HandleFunc("/admin/reset", byMethod(map[string]http.HandlerFunc{http.MethodPost: s.handleReset}))
	mux.HandleFunc("/", notFound)
	return mux
}

func (s *Server) handleGetFaults(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Faults())
}

// Faults returns the fault settings in force.
func (s *Server) Faults() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults
}

// handlePatchFaults merges the given settings: JSON decoding onto a copy of
// the current settings keeps every field the body does not name.
func (s *Server) handlePatchFaults(w http.ResponseWriter, r *http.Request) {
	raw, ok := readBody(w, r)
	if !ok {
		return
	}
	next, code, err := s.patchFaults(raw)
	switch code {
	case http.StatusOK:
		s.log.Info("faults changed", "faults", string(raw))
		writeJSON(w, code, next)
	case http.StatusBadRequest:
		writeError(w, code, gateway.CodeBadRequest, err.Error())
	default:
		writeError(w, code, "LISTENER", err.Error())
	}
}

// patchFaults merges raw onto the settings in force and puts the result in
// force, answering the HTTP status that says how it went. Decoding and
// validating run outside s.mu; the result goes in force only if nothing
// changed the settings meanwhile (another patch, a failNext counting down),
// else it is merged again onto the newer settings, so no change is lost.
func (s *Server) patchFaults(raw []byte) (Faults, int, error) {
	for {
		current := s.Faults()
		next := current
		if err := decodeStrict(raw, &next); err != nil {
			return Faults{}, http.StatusBadRequest, err
		}
		if err := next.Validate(); err != nil {
			return Faults{}, http.StatusBadRequest, err
		}
		swapped, err := s.swapFaults(current, next)
		if err != nil {
			return Faults{}, http.StatusInternalServerError, err
		}
		if swapped {
			s.logDown(current.Down, next.Down)
			return next, http.StatusOK, nil
		}
	}
}

// swapFaults puts next in force, with the gateway listener to match, unless
// the settings in force are no longer current.
func (s *Server) swapFaults(current, next Faults) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.faults != current {
		return false, nil
	}
	if err := s.setDown(next.Down); err != nil {
		return false, err
	}
	s.faults = next
	return true, nil
}

type resolveRequest struct {
	Status   string `json:"status"`
	Reason   string `json:"reason"`
	Callback *bool  `json:"callback"`
}

func (s *Server) handleResolve(w http.ResponseWriter, r *http.Request) {
	raw, ok := readBody(w, r)
	if !ok {
		return
	}
	var req resolveRequest
	if err := decodeStrict(raw, &req); err != nil {
		writeError(w, http.StatusBadRequest, gateway.CodeBadRequest, err.Error())
		return
	}
	if req.Status != gateway.StatusSuccess && req.Status != gateway.StatusFailed {
		writeError(w, http.StatusBadRequest, gateway.CodeBadRequest, fmt.Sprintf("status must be SUCCESS or FAILED, got %q", req.Status))
		return
	}
	if req.Status == gateway.StatusFailed && req.Reason == "" {
		req.Reason = "LIMIT_EXCEEDED"
	}
	callback := req.Callback == nil || *req.Callback
	key := r.PathValue("key")
	var view gateway.TransactionInfo
	var url string
	var sc trace.SpanContext
	var found bool
	s.locked(func() {
		var tx *transaction
		if tx, found = s.txs[key]; !found {
			return
		}
		tx.Status, tx.Reason = req.Status, req.Reason
		if req.Status == gateway.StatusSuccess {
			tx.Reason = ""
		}
		view, url, sc = tx.view(), tx.CallbackURL, tx.trace
	})
	if !found {
		writeError(w, http.StatusNotFound, gateway.CodeNotFound, fmt.Sprintf("no transaction %q", key))
		return
	}
	if callback {
		s.sendCallback(view, url, sc)
	}
	writeJSON(w, http.StatusOK, view)
}

// OrderStats is one order's line of /admin/stats.
type OrderStats struct {
	CreateRequests int `json:"createRequests"`
	// CreatedThen500 counts the creates that made a transaction and
	// answered 500 (create.createdThen500Rate).
	CreatedThen500 int      `json:"createdThen500"`
	Transactions   []string `json:"transactions"`
	Successful     int      `json:"successful"`
	Cancelled      int      `json:"cancelled"`
	Refunded       int      `json:"refunded"`
}

// Stats is the body of /admin/stats: what the gateway saw, per order.
type Stats struct {
	Orders map[string]OrderStats `json:"orders"`
	// Requests counts every request received per endpoint (create, lookup, cancel).
	Requests map[string]int `json:"requests"`
}

// Stats returns the per-order counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Stats{Orders: map[string]OrderStats{}, Requests: map[string]int{"create": 0, "lookup": 0, "cancel": 0}}
	for k, v := range s.calls {
		out.Requests[k] = v
	}
	for id, st := range s.orders {
		os := OrderStats{CreateRequests: st.createRequests, CreatedThen500: st.createdThen500, Transactions: slices.Clone(st.keys)}
		if os.Transactions == nil {
			os.Transactions = []string{}
		}
		for _, key := range st.keys {
			switch tx := s.txs[key]; {
			case tx.Status == gateway.StatusSuccess:
				os.Successful++
			case tx.Status == gateway.StatusCancelled:
				os.Cancelled++
				if tx.Refunded {
					os.Refunded++
				}
			}
		}
		out.Orders[id] = os
	}
	return out
}

func (s *Server) handleStats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Stats())
}

func (s *Server) handleReset(w http.ResponseWriter, _ *http.Request) {
	faults, err := s.reset()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "LISTENER", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"reset": true, "faults": faults})
}

// reset forgets every transaction, order, key and count, and restores the
// default faults with the gateway listener to match.
func (s *Server) reset() (Faults, error) {
	var was bool
	var err error
	s.locked(func() {
		was = s.faults.Down
		s.txs = map[string]*transaction{}
		s.orders = map[string]*orderStats{}
		s.idem = map[string]*idemEntry{}
		s.calls = map[string]int{}
		if err = s.setDown(s.cfg.Faults.Down); err == nil {
			s.faults = s.cfg.Faults
		}
	})
	if err != nil {
		return Faults{}, err
	}
	s.logDown(was, s.cfg.Faults.Down)
	return s.cfg.Faults, nil
}
