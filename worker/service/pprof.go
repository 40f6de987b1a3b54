package service

import (
	"net/http"
	"net/http/pprof"
)

// servePprof adds Go's profiler under /debug/pprof/ (--pprof): for `make
// bench` and profiling by hand. It is off by default because a profile
// reveals the process's internals and costs CPU while it runs; the worker's
// HTTP port is on loopback unless configured otherwise.
func servePprof(mux *http.ServeMux) {
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
}
