package config

import (
	"net/http"
	"time"
)

// HTTPTimeouts bound how long one client may hold a connection of a payguard
// HTTP server (the worker's callback, health and metrics endpoints; pgsim's
// gateway and admin APIs). Without them a client that trickles its body,
// never reads the answer or leaves a kept-alive connection idle pins a
// connection and a goroutine for ever.
type HTTPTimeouts struct {
	ReadHeader time.Duration // the request line and headers
	Read       time.Duration // the whole request, body included
	Write      time.Duration // from the end of the headers to the end of the answer
	Idle       time.Duration // a kept-alive connection waiting for its next request
}

// DefaultHTTPTimeouts are the production values: far more than an honest
// client needs to send a body of at most 64 KiB or to read an answer.
func DefaultHTTPTimeouts() HTTPTimeouts {
	return HTTPTimeouts{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: 30 * time.Second, Idle: time.Minute}
}

// OrDefaults puts the default in place of every zero or negative field: to
// http.Server a zero means no limit at all, which no caller means.
func (t HTTPTimeouts) OrDefaults() HTTPTimeouts {
	d := DefaultHTTPTimeouts()
	or := func(v, def time.Duration) time.Duration {
		if v > 0 {
			return v
		}
		return def
	}
	return HTTPTimeouts{ReadHeader: or(t.ReadHeader, d.ReadHeader), Read: or(t.Read, d.Read), Write: or(t.Write, d.Write), Idle: or(t.Idle, d.Idle)}
}

// Server returns an http.Server for h with these timeouts, defaults in place
// of zeros.
func (t HTTPTimeouts) Server(h http.Handler) *http.Server {
	t = t.OrDefaults()
	return &http.Server{Handler: h, ReadHeaderTimeout: t.ReadHeader, ReadTimeout: t.Read, WriteTimeout: t.Write, IdleTimeout: t.Idle}
}
