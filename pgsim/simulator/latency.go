package simulator

import (
	"context"
	"net/http"
	"time"
)

// The configured latency holds every answer of the gateway API once, as the
// simulator's does: a refusal, an injected failure and a 404 alike, so a
// client's timeouts meet the same delays whatever it sent. A handler that
// must wait at a chosen point (create waits while its idempotency key is in
// flight) calls latency there; otherwise the first byte written waits.

type latencyKey struct{}

// latencyWriter applies the latency before the first header or byte, unless
// the handler already applied it.
type latencyWriter struct {
	http.ResponseWriter
	s    *Server
	ctx  context.Context
	done bool
	ok   bool
}

// wait applies the latency once; it reports whether the full wait elapsed.
func (l *latencyWriter) wait() bool {
	if !l.done {
		l.done = true
		var d time.Duration
		l.s.locked(func() { d = l.s.between(l.s.faults.Latency.Min, l.s.faults.Latency.Max) })
		l.ok = sleep(l.ctx, d)
	}
	return l.ok
}

func (l *latencyWriter) WriteHeader(code int) {
	l.wait()
	l.ResponseWriter.WriteHeader(code)
}

func (l *latencyWriter) Write(b []byte) (int, error) {
	l.wait()
	return l.ResponseWriter.Write(b)
}

// delayed wraps the gateway API so every answer carries the latency.
func (s *Server) delayed(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lw := &latencyWriter{ResponseWriter: w, s: s, ctx: r.Context()}
		h.ServeHTTP(lw, r.WithContext(context.WithValue(r.Context(), latencyKey{}, lw)))
	})
}

// latency applies the request's latency now (at most once per request); it
// reports whether the full wait elapsed, false when the client went away.
func (s *Server) latency(r *http.Request) bool {
	if lw, ok := r.Context().Value(latencyKey{}).(*latencyWriter); ok {
		return lw.wait()
	}
	return r.Context().Err() == nil
}
