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
// would: one POST /api/v1/orders each, under an Idempotency-Key of the
// order's id. An order answered 201, or 409 OUT_OF_STOCK (placed, and
// REJECTED), is placed; any other answer is an error (loadgen counts it a
// failed request). It is loadgen.Config's Place.
func Placer(baseURL, token string, hc *http.Client) func(ctx context.Context, in workflows.PaymentInput) error {
	return func(ctx context.Context, in workflows.PaymentInput) error {
		body, _ := json.Marshal(OrderRequest{OrderID: in.OrderID, ProductID: in.ProductID, Quantity: in.Quantity, Amount: in.Amount,
			CardType: in.CardType, CardNo: in.CardNo, Deadline: in.Deadline.String()})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/api/v1/orders", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(HeaderUser, in.UserID)
		req.Header.Set(HeaderIdempotencyKey, in.OrderID)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes))
		if resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusOK {
			return nil
		}
		var p Problem
		if json.Unmarshal(raw, &p) == nil && p.Code == CodeOutOfStock {
			return nil
		}
		return fmt.Errorf("POST /api/v1/orders: HTTP %d %s", resp.StatusCode, bytes.TrimSpace(raw))
	}
}
