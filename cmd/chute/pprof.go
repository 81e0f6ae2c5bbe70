package main

import (
	"fmt"
	"net/http"
	"runtime/pprof"
	"strconv"
	"time"
)

// Profiles are served on the metrics listener, under /debug/pprof/, in the
// format `go tool pprof` reads:
//
//	/debug/pprof/profile?seconds=N   CPU profile over N seconds (default 30, at most 300)
//	/debug/pprof/{name}              heap, allocs, goroutine, mutex, block, threadcreate
//
// runtime/pprof is used directly: net/http/pprof registers itself on the
// default mux when imported.
func handleProfiles(mux *http.ServeMux) {
	mux.HandleFunc("GET /debug/pprof/profile", func(w http.ResponseWriter, r *http.Request) {
		secs, err := strconv.Atoi(r.URL.Query().Get("seconds"))
		if err != nil || secs <= 0 {
			secs = 30
		}
		secs = min(secs, 300)
		w.Header().Set("Content-Type", "application/octet-stream")
		if err := pprof.StartCPUProfile(w); err != nil {
			http.Error(w, "cpu profile: "+err.Error(), http.StatusConflict)
			return
		}
		select {
		case <-time.After(time.Duration(secs) * time.Second):
		case <-r.Context().Done():
		}
		pprof.StopCPUProfile()
	})
	mux.HandleFunc("GET /debug/pprof/{name}", func(w http.ResponseWriter, r *http.Request) {
		p := pprof.Lookup(r.PathValue("name"))
		if p == nil {
			http.Error(w, fmt.Sprintf("no profile %q", r.PathValue("name")), http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_ = p.WriteTo(w, 0)
	})
}
