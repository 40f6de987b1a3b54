package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/payguard/payguard/workflows"
)

// Placer places orders through the API at baseURL, as a client of it
// would: one POST /api/v1/orders each (PlaceRequest). It is
// loadgen.Config's Place.
func Placer(baseURL, token string, hc *http.Client) func(ctx context.Context, in workflows.PaymentInput) error {
	return func(ctx context.Context, in workflows.PaymentInput) error {
		body, header := PlaceRequest(in, token)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/api/v1/orders", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header = header
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes))
		return Placed(resp.StatusCode, raw)
	}
}

// PlaceRequest is the body and headers of the POST /api/v1/orders that
// places in, under an Idempotency-Key of the order's id; token, when not
// empty, is the API's bearer token.
func PlaceRequest(in workflows.PaymentInput, token string) ([]byte, http.Header) {
	body, _ := json.Marshal(OrderRequest{OrderID: in.OrderID, ProductID: in.ProductID, Quantity: in.Quantity, Amount: in.Amount,
		CardType: in.CardType, CardNo: in.CardNo, Deadline: in.Deadline.String()})
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set(HeaderUser, in.UserID)
	h.Set(HeaderIdempotencyKey, in.OrderID)
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	return body, h
}

// Placed judges the API's answer to a PlaceRequest: 201 (or 200, a
// replay), or 409 OUT_OF_STOCK (placed, and REJECTED), is a placed order;
// any other answer is an error (loadgen counts it a failed request).
func Placed(code int, body []byte) error {
	if code == http.StatusCreated || code == http.StatusOK {
		return nil
	}
	var p Problem
	if json.Unmarshal(body, &p) == nil && p.Code == CodeOutOfStock {
		return nil
	}
	return fmt.Errorf("POST /api/v1/orders: HTTP %d %s", code, bytes.TrimSpace(body))
}
