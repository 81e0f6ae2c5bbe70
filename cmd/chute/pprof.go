package main

import (
	"net/http"
	"net/http/pprof"
)

// handleProfiles serves net/http/pprof on the metrics listener, under
// /debug/pprof/: the index, cmdline, profile, symbol, trace and every
// runtime profile by name (goroutine?debug=1 and =2 as text), in the form
// `go tool pprof` and `go tool trace` read.
//
// Importing net/http/pprof also registers the handlers on
// http.DefaultServeMux; chute never serves that mux, so only this one
// exposes them.
func handleProfiles(mux *http.ServeMux) {
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
}
