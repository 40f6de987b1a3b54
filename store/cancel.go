package store

import (
	"context"
	"fmt"
	"time"
)

// CancelCheck is what a compensation tells Cancel of its search of the
// gateway by order id, so that Cancel can refuse when the database knows of
// a create the search may have missed. The zero value checks nothing.
type CancelCheck struct {
	// Unsearched: no search was made. Refused when any create of the order
	// may have reached the gateway.
	Unsearched bool
	// SearchedAt is when the search was made, by the database's clock
	// (Store.Now): refused when a create was answered accepted or unknown
	// after it — it may have reached the gateway after the search looked.
	SearchedAt time.Time
}

// Cancel is compensation's Advance: c moves the order to CANCELLED. In the
// same transaction, under the order's lock, a create still SENDING is
// closed as UNKNOWN (the attempt only: the cancel moves the statuses), so
// that an answer its sender records afterwards is refused: a sender that
// stalled and sent after the compensation learns so, and undoes its charge
// (activities.RequestPayment). A compensation whose view of the order is
// older than the database's is refused with ErrMaybeSent, and nothing
// changes (CancelCheck): it searches the gateway again and retries.
func (s *Store) Cancel(ctx context.Context, c Change, check CancelCheck) error {
	if c.OrderID == "" || c.Cause == "" {
		return fmt.Errorf("%w: change needs an order id and a cause", ErrInvalid)
	}
	return s.inTx(ctx, func(tx *tx) error {
		current, err := lockOrder(ctx, tx, c.OrderID)
		if err != nil {
			return err
		}
		if current.Final() {
			return advance(ctx, tx, c)
		}
		if check.Unsearched || !check.SearchedAt.IsZero() {
			attempts, err := attemptsOf(ctx, tx, c.OrderID)
			if err != nil {
				return err
			}
			if a, missed := missedBy(attempts, check); missed {
				return fmt.Errorf("%w: order %s, create #%d %s %s", ErrMaybeSent, c.OrderID, a.No, a.State, a.Outcome)
			}
		}
		// Only the attempt is closed: the cancel itself moves the statuses,
		// from wherever a lookup may have taken the payment meanwhile
		// (PENDING cannot go back to UNKNOWN).
		if _, err := closeSending(ctx, tx, c.OrderID, "the order was cancelled first"); err != nil {
			return err
		}
		return advance(ctx, tx, c)
	})
}

// missedBy finds a create the compensation's search (check) may have
// missed: any that may have reached the gateway when it made none, or one
// answered accepted or unknown after it.
func missedBy(attempts []Attempt, check CancelCheck) (Attempt, bool) {
	for _, a := range attempts {
		late := a.AnsweredAt != nil && a.AnsweredAt.After(check.SearchedAt) &&
			(a.Outcome == OutcomeAccepted || a.Outcome == OutcomeUnknown)
		if check.Unsearched && a.MaybeSent() || !check.Unsearched && late {
			return a, true
		}
	}
	return Attempt{}, false
}

// Now is the database's clock, which stamps the attempts' answers.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var now time.Time
	err := s.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now)
	return now, err
}
