package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/payguard/payguard/ids"
)

// Stock is a product's counters; Total = Available + Reserved + Sold always.
type Stock struct {
	ProductID string `json:"productId"`
	Total     int64  `json:"total"`
	Available int64  `json:"available"`
	Reserved  int64  `json:"reserved"`
	Sold      int64  `json:"sold"`
}

// SetStocks sets each product's total stock to total (SetStock), stopping
// at the first it cannot set: the stocking step of a load, chaos, demo or
// bench run.
func (s *Store) SetStocks(ctx context.Context, productIDs []string, total int64) error {
	for _, p := range productIDs {
		if _, err := s.SetStock(ctx, p, total); err != nil {
			return fmt.Errorf("set stock of %s: %w", p, err)
		}
	}
	return nil
}

// SetStock sets a product's total stock, creating the product when it is
// new. Reserved and sold units are kept; the rest becomes available, so a
// total below reserved+sold is refused with ErrStockInUse.
func (s *Store) SetStock(ctx context.Context, productID string, total int64) (Stock, error) {
	if err := ids.CheckProduct(productID); err != nil {
		return Stock{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if total < 0 {
		return Stock{}, fmt.Errorf("%w: product %q, total %d", ErrInvalid, productID, total)
	}
	var st Stock
	err := s.pool.QueryRow(ctx, `
		INSERT INTO products (product_id, total, available, reserved, sold)
		VALUES ($1, $2, $2, 0, 0)
		ON CONFLICT (product_id) DO UPDATE
		SET total = EXCLUDED.total,
		    available = EXCLUDED.total - products.reserved - products.sold,
		    updated_at = now()
		RETURNING product_id, total, available, reserved, sold`, productID, total).
		Scan(&st.ProductID, &st.Total, &st.Available, &st.Reserved, &st.Sold)
	if pgCode(err) == codeCheckViolation {
		return Stock{}, fmt.Errorf("%w: product %s, total %d", ErrStockInUse, productID, total)
	}
	if err != nil {
		return Stock{}, fmt.Errorf("set stock of %s: %w", productID, err)
	}
	return st, nil
}

// SetAvailable sets how many units of a product new orders may reserve,
// creating the product when it is new: its total becomes available plus
// the reserved and sold units, which are kept.
func (s *Store) SetAvailable(ctx context.Context, productID string, available int64) (Stock, error) {
	if err := ids.CheckProduct(productID); err != nil {
		return Stock{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if available < 0 {
		return Stock{}, fmt.Errorf("%w: product %q, available %d", ErrInvalid, productID, available)
	}
	var st Stock
	err := s.pool.QueryRow(ctx, `
		INSERT INTO products (product_id, total, available, reserved, sold)
		VALUES ($1, $2, $2, 0, 0)
		ON CONFLICT (product_id) DO UPDATE
		SET total = EXCLUDED.available + products.reserved + products.sold,
		    available = EXCLUDED.available,
		    updated_at = now()
		RETURNING product_id, total, available, reserved, sold`, productID, available).
		Scan(&st.ProductID, &st.Total, &st.Available, &st.Reserved, &st.Sold)
	if pgCode(err) == codeNumericOutOfRange {
		return Stock{}, fmt.Errorf("%w: product %s, available %d: the total would not fit", ErrInvalid, productID, available)
	}
	if err != nil {
		return Stock{}, fmt.Errorf("set available stock of %s: %w", productID, err)
	}
	return st, nil
}

// GetStock reads a product's counters.
func (s *Store) GetStock(ctx context.Context, productID string) (Stock, error) {
	var st Stock
	err := s.pool.QueryRow(ctx, `
		SELECT product_id, total, available, reserved, sold FROM products WHERE product_id = $1`, productID).
		Scan(&st.ProductID, &st.Total, &st.Available, &st.Reserved, &st.Sold)
	if errors.Is(err, pgx.ErrNoRows) {
		return Stock{}, fmt.Errorf("%w: product %s", ErrUnknownProduct, productID)
	}
	if err != nil {
		return Stock{}, fmt.Errorf("read stock of %s: %w", productID, err)
	}
	return st, nil
}
