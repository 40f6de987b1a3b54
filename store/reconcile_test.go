package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/store"
)

// Paging the sweep's candidates (docs/design.md §10) on orders that share
// one updated_at, as a batch settled in one statement would: the cursor's
// order id breaks the tie, so every order comes exactly once, none skipped,
// none looping, whatever the page size.
func TestReconcileCandidatesPageThroughEqualTimestamps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testenv.Store(t)
	_, err := s.SetStock(ctx, "P1", 100)
	require.NoError(t, err)
	var want []string
	for i := range 7 {
		id := fmt.Sprintf("page-%02d", i)
		_, err := s.Reserve(ctx, newOrder(id, 1))
		require.NoError(t, err)
		want = append(want, id)
	}
	// Two groups of equal timestamps, microsecond-precise as PostgreSQL keeps them.
	at := time.Date(2026, 11, 30, 12, 0, 0, 123456000, time.UTC)
	_, err = s.Pool().Exec(ctx, `UPDATE orders SET updated_at = CASE WHEN order_id < 'page-04' THEN $1::timestamptz ELSE $1::timestamptz + interval '1 microsecond' END`, at)
	require.NoError(t, err)

	for _, limit := range []int{1, 2, 3, 7, 10} {
		var got []string
		var after store.Cursor
		for pages := 0; ; pages++ {
			require.Less(t, pages, 20, "paging loops")
			page, err := s.ReconcileCandidates(ctx, at.Add(-time.Hour), at.Add(time.Hour), after, limit)
			require.NoError(t, err)
			for _, c := range page {
				got = append(got, c.OrderID)
			}
			if len(page) < limit {
				break
			}
			// The cursor goes through the sweep's history as JSON.
			raw, err := json.Marshal(page[len(page)-1].Cursor)
			require.NoError(t, err)
			after = store.Cursor{}
			require.NoError(t, json.Unmarshal(raw, &after))
		}
		assert.Equal(t, want, got, "page size %d", limit)
	}
}
