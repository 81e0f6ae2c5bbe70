package main

import (
	"net/http"
	"net/http/pprof"
)

// handleProfiles serves net/http/pprof on the metrics listener, under
// /debug/pprof/: the index, profile, symbol, trace and every runtime
// profile by name (goroutine?debug=1 and =2 as text), in the form `go
// tool pprof` and `go tool trace` read.
//
// Not cmdline: the command line holds --gossip-key, from which anyone
// derives the peer certificates of a cluster without peer certificate
// files, and --clickhouse-url's password, and the metrics listener has
// no authentication. It answers 404 saying so (`go tool pprof` does not
// need it).
//
// Importing net/http/pprof also registers the handlers on
// http.DefaultServeMux; chute never serves that mux, so only this one
// exposes them.
func handleProfiles(mux *http.ServeMux) {
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "chute does not serve its command line: it may hold secrets (--gossip-key, --clickhouse-url)", http.StatusNotFound)
	})
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
}
