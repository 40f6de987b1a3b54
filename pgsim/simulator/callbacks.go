package simulator

import (
	"context"
	"encoding/json"
	"io"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/payguard/payguard/gateway"
)

// Callback retry schedule: 8 tries, 250 ms doubling up to 10 s between them.
const (
	callbackTries      = 8
	callbackFirstDelay = 250 * time.Millisecond
	callbackMaxDelay   = 10 * time.Second
)

// sendCallback delivers a transaction's outcome to its callback URL in the
// background, with the callback faults applied, in the trace sc (the
// create's).
func (s *Server) sendCallback(tx gateway.TransactionInfo, url string, sc trace.SpanContext) {
	var f CallbackFaults
	var drop, duplicate bool
	s.locked(func() {
		f = s.faults.Callback
		drop, duplicate = s.chance(f.DropRate), s.chance(f.DuplicateRate)
	})
	if drop {
		s.log.Info("callback dropped", "transaction_key", tx.TransactionKey, "order_id", tx.OrderID)
		return
	}
	copies := 1
	if duplicate {
		copies = 2
	}
	for range copies {
		s.goBackground(func(ctx context.Context) {
			if !sleep(ctx, time.Duration(f.Delay)) {
				return
			}
			s.deliver(trace.ContextWithSpanContext(ctx, sc), tx, url)
		})
	}
}

// deliver POSTs one callback, retrying on a connection error or a non-2xx
// answer. Its body is the lookup's data, bare, as the simulator sends it.
func (s *Server) deliver(ctx context.Context, tx gateway.TransactionInfo, url string) {
	body, _ := json.Marshal(tx)
	delay := callbackFirstDelay
	for try := 1; try <= callbackTries; try++ {
		status, err := s.post(ctx, url, body)
		if err == nil && status >= 200 && status < 300 {
			s.log.Info("callback delivered", "transaction_key", tx.TransactionKey, "order_id", tx.OrderID,
				"status", tx.Status, "try", try)
			return
		}
		s.log.Warn("callback failed", "transaction_key", tx.TransactionKey, "try", try, "http_status", status, "error", err)
		if try == callbackTries || !sleep(ctx, delay) {
			return
		}
		delay = min(delay*2, callbackMaxDelay)
	}
}

func (s *Server) post(ctx context.Context, url string, body []byte) (int, error) {
	req, err := gateway.NewCallback(ctx, url, body)
	if err != nil {
		return 0, err
	}
	// Unsigned, the callback is the simulator's own: a receiver in lookup
	// mode must confirm it by asking the gateway.
	if !s.cfg.UnsignedCallbacks {
		gateway.SignCallback(req, s.cfg.Secret, body, time.Now())
	}
	resp, err := s.callback.Do(req)
	if err != nil {
		return 0, err
	}
	// Read to the end (a receiver's answer is small; a bounded read keeps
	// a runaway one from holding the sender): only a body read to its end
	// lets the transport reuse the connection.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, nil
}
