package store

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// IdempotencyTTL is how long an Idempotency-Key and its answer are kept.
const IdempotencyTTL = 24 * time.Hour

// Idempotent is where a request under an Idempotency-Key stands.
type Idempotent struct {
	State   IdempotentState
	OrderID string // the order the key placed (or places now)
	// TakenUp is a StateFirst of a key an earlier request held and could
	// not answer (its lease ran out, or it released the key): that request
	// may have placed OrderID already.
	TakenUp bool
	// Code and Answer are the first answer, for StateAnswered.
	Code   int
	Answer []byte
}

// IdempotentState says what a request under a key must do.
type IdempotentState int

const (
	// StateFirst: this request holds the key and places OrderID; a
	// request taking up a key whose holder vanished (its lease ran out)
	// is first too, and places the same order.
	StateFirst IdempotentState = iota
	// StateInFlight: another request holds the key now.
	StateInFlight
	// StateAnswered: the key's first answer is Code and Answer.
	StateAnswered
	// StateMismatch: the key was used for another request.
	StateMismatch
)

// BeginIdempotent takes the key of a request whose fingerprint is hash, or
// reports who has it. orderID is the order a first request places, of
// productID: a product that does not exist is ErrUnknownProduct, the key
// left as it was. lease bounds how long this request holds the key
// unanswered. A key older than IdempotencyTTL is as good as new.
//
// A key new (or past its TTL) of a product that exists is taken in one
// statement, a round trip on its own, which checks the product too; only a
// key met before is read, locked, in a transaction.
func (s *Store) BeginIdempotent(ctx context.Context, userID, key string, hash []byte, orderID, productID string, lease time.Duration) (Idempotent, error) {
	took, err := takeIdempotent(ctx, s.pool, userID, key, hash, orderID, productID, lease)
	if err != nil {
		return Idempotent{}, err
	}
	if took {
		return Idempotent{State: StateFirst, OrderID: orderID}, nil
	}
	var known bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM products WHERE product_id = $1)`, productID).Scan(&known); err != nil {
		return Idempotent{}, fmt.Errorf("read product %s: %w", productID, err)
	}
	if !known {
		return Idempotent{}, fmt.Errorf("%w: %s", ErrUnknownProduct, productID)
	}
	var out Idempotent
	err = s.inTx(ctx, func(tx *tx) error {
		// Again inside the transaction: the key may have passed its TTL,
		// or been deleted, since.
		took, err := takeIdempotent(ctx, tx, userID, key, hash, orderID, productID, lease)
		if err != nil {
			return err
		}
		if took {
			out = Idempotent{State: StateFirst, OrderID: orderID}
			return nil
		}
		var (
			had    []byte
			code   *int
			answer []byte
			held   bool
		)
		err = tx.QueryRow(ctx, `
			SELECT request_hash, order_id, status_code, answer, coalesce(locked_until > now(), false)
			FROM idempotency_keys WHERE user_id = $1 AND key = $2 FOR UPDATE`, userID, key).
			Scan(&had, &out.OrderID, &code, &answer, &held)
		if err != nil {
			return fmt.Errorf("read idempotency key: %w", err)
		}
		switch {
		case held:
			out.State = StateInFlight
		case !bytes.Equal(had, hash):
			out.State = StateMismatch
		case code != nil:
			out.State, out.Code, out.Answer = StateAnswered, *code, answer
		default:
			out.State, out.TakenUp = StateFirst, true
			_, err = tx.Exec(ctx, `UPDATE idempotency_keys SET locked_until = now() + make_interval(secs => $3)
				WHERE user_id = $1 AND key = $2`, userID, key, lease.Seconds())
		}
		return err
	})
	return out, err
}

// execer is a pool or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// takeIdempotent takes the key when it is new or past its TTL and the
// product exists.
func takeIdempotent(ctx context.Context, q execer, userID, key string, hash []byte, orderID, productID string, lease time.Duration) (bool, error) {
	tag, err := q.Exec(ctx, `
		INSERT INTO idempotency_keys (user_id, key, request_hash, order_id, locked_until)
		SELECT $1, $2, $3, $4, now() + make_interval(secs => $5)
		WHERE EXISTS (SELECT 1 FROM products WHERE product_id = $7)
		ON CONFLICT (user_id, key) DO UPDATE
		SET request_hash = EXCLUDED.request_hash, order_id = EXCLUDED.order_id, status_code = NULL, answer = NULL,
		    locked_until = EXCLUDED.locked_until, created_at = now()
		WHERE idempotency_keys.created_at <= now() - make_interval(secs => $6)`,
		userID, key, hash, orderID, lease.Seconds(), IdempotencyTTL.Seconds(), productID)
	if err != nil {
		return false, fmt.Errorf("take idempotency key: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// AnswerIdempotent keeps the first answer under the key for its repeats.
func (s *Store) AnswerIdempotent(ctx context.Context, userID, key string, code int, answer []byte) error {
	_, err := s.pool.Exec(ctx, `UPDATE idempotency_keys SET status_code = $3, answer = $4, locked_until = NULL
		WHERE user_id = $1 AND key = $2`, userID, key, code, answer)
	if err != nil {
		return fmt.Errorf("keep the answer of idempotency key: %w", err)
	}
	return nil
}

// ReleaseIdempotent lets the next request under the key take it up at once
// (this one could not answer): it places the same order, whose one
// workflow id makes a second start of it the first one.
func (s *Store) ReleaseIdempotent(ctx context.Context, userID, key string) error {
	_, err := s.pool.Exec(ctx, `UPDATE idempotency_keys SET locked_until = NULL
		WHERE user_id = $1 AND key = $2 AND status_code IS NULL`, userID, key)
	if err != nil {
		return fmt.Errorf("release idempotency key: %w", err)
	}
	return nil
}

// PurgeIdempotent deletes the keys older than IdempotencyTTL.
func (s *Store) PurgeIdempotent(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM idempotency_keys WHERE created_at <= now() - make_interval(secs => $1)`,
		IdempotencyTTL.Seconds())
	if err != nil {
		return 0, fmt.Errorf("purge idempotency keys: %w", err)
	}
	return tag.RowsAffected(), nil
}
