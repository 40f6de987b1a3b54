package httpapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/payguard/payguard/ids"
	"github.com/payguard/payguard/store"
)

// StockRequest is PUT /api/v1/products/{productId}/stock's body: how many
// units new orders may reserve (reserved and sold units are kept).
type StockRequest struct {
	Available *int64 `json:"available"`
}

// putStock is PUT /api/v1/products/{productId}/stock.
func (s *Server) putStock(w http.ResponseWriter, r *http.Request) {
	productID := r.PathValue("productId")
	if err := ids.CheckProduct(productID); err != nil {
		writeProblem(w, problem(http.StatusBadRequest, CodeInvalid, err.Error()))
		return
	}
	var req StockRequest
	if p := readJSON(w, r, &req); p != nil {
		writeProblem(w, *p)
		return
	}
	if req.Available == nil || *req.Available < 0 {
		writeProblem(w, problem(http.StatusBadRequest, CodeInvalid, "available must be a whole number ≥ 0"))
		return
	}
	st, err := s.store.SetAvailable(r.Context(), productID, *req.Available)
	if errors.Is(err, store.ErrInvalid) {
		writeProblem(w, problem(http.StatusBadRequest, CodeInvalid, err.Error()))
		return
	}
	if err != nil {
		writeProblem(w, s.unavailable("database", err))
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// getStock is GET /api/v1/products/{productId}/stock.
func (s *Server) getStock(w http.ResponseWriter, r *http.Request) {
	productID := r.PathValue("productId")
	if err := ids.CheckProduct(productID); err != nil {
		writeProblem(w, problem(http.StatusBadRequest, CodeInvalid, err.Error()))
		return
	}
	st, err := s.store.GetStock(r.Context(), productID)
	switch {
	case errors.Is(err, store.ErrUnknownProduct):
		writeProblem(w, problem(http.StatusNotFound, CodeUnknownProduct, fmt.Sprintf("unknown product %q", productID)))
	case err != nil:
		writeProblem(w, s.unavailable("database", err))
	default:
		writeJSON(w, http.StatusOK, st)
	}
}
