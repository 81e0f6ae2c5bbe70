package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// Server labels used by the matrix, and by the ratios of the report.
const (
	ServerChute       = "chute"
	ServerChuteTraced = "chute, traced 100%"
	ServerNoop        = "no-op"
)

// Report is what `chute bench` prints: the results in run order; for every
// client count measured against both servers, chute's rate as a fraction of
// the no-op rate; and for every client count measured against both chute
// nodes, the traced node's rate as a fraction of the untraced node's.
type Report struct {
	Results []Result     `json:"results"`
	Ratios  []Ratio      `json:"ratios,omitempty"`
	Tracing []TraceRatio `json:"tracing,omitempty"`
}

// Ratio is chute's puts/s divided by the no-op server's at one client count.
type Ratio struct {
	Clients      int     `json:"clients"`
	ChutePerNoop float64 `json:"chute_per_noop"`
}

// TraceRatio is the traced chute node's puts/s divided by the untraced
// node's at one client count: what tracing every put costs.
type TraceRatio struct {
	Clients           int     `json:"clients"`
	TracedPerUntraced float64 `json:"traced_per_untraced"`
}

// NewReport returns the report of results, computing the ratios.
func NewReport(results []Result) Report {
	r := Report{Results: results}
	for _, p := range ratios(results, ServerChute, ServerNoop) {
		r.Ratios = append(r.Ratios, Ratio{Clients: p.clients, ChutePerNoop: p.value})
	}
	for _, p := range ratios(results, ServerChuteTraced, ServerChute) {
		r.Tracing = append(r.Tracing, TraceRatio{Clients: p.clients, TracedPerUntraced: p.value})
	}
	return r
}

// clientRatio is the puts/s of one server over another's at one client
// count.
type clientRatio struct {
	clients int
	value   float64
}

// ratios pairs the num and den results of each client count, in the order
// the client counts first appear.
func ratios(results []Result, num, den string) []clientRatio {
	var out []clientRatio
	seen := make(map[int]bool)
	for _, r := range results {
		if seen[r.Clients] {
			continue
		}
		seen[r.Clients] = true
		n, okN := find(results, num, r.Clients)
		d, okD := find(results, den, r.Clients)
		if okN && okD && d.PutsPerSec > 0 {
			out = append(out, clientRatio{clients: r.Clients, value: n.PutsPerSec / d.PutsPerSec})
		}
	}
	return out
}

func find(results []Result, server string, clients int) (Result, bool) {
	for _, r := range results {
		if r.Server == server && r.Clients == clients {
			return r, true
		}
	}
	return Result{}, false
}

// WriteMarkdown writes a markdown table with one row per result, then the
// ratio lines when there are ratios, the spans the traced runs sent, and
// one line per result that had errors.
func (r Report) WriteMarkdown(w io.Writer) error {
	var b bytes.Buffer
	b.WriteString("| clients | conns | server | puts/s | p50 ms | p99 ms |\n")
	b.WriteString("|--------:|------:|--------|-------:|-------:|-------:|\n")
	for _, res := range r.Results {
		fmt.Fprintf(&b, "| %d | %d | %s | %.0f | %s | %s |\n",
			res.Clients, res.Conns, res.Server, res.PutsPerSec, millis(res.P50), millis(res.P99))
	}
	if len(r.Ratios) > 0 || len(r.Tracing) > 0 {
		b.WriteString("\n")
	}
	if len(r.Ratios) > 0 {
		b.WriteString("chute/no-op puts/s:")
		for i, ra := range r.Ratios {
			writeRatio(&b, i, ra.Clients, ra.ChutePerNoop)
		}
		b.WriteString("\n")
	}
	if len(r.Tracing) > 0 {
		b.WriteString("traced/untraced chute puts/s:")
		for i, ra := range r.Tracing {
			writeRatio(&b, i, ra.Clients, ra.TracedPerUntraced)
		}
		b.WriteString("\n")
	}
	traced := 0
	for _, res := range r.Results {
		if res.Trace == nil {
			continue
		}
		if traced == 0 {
			b.WriteString("spans received by the bench's OTLP sink:")
		} else {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %d clients %d for %d KV calls", res.Clients, res.Trace.Spans, res.Trace.Calls)
		traced++
	}
	if traced > 0 {
		b.WriteString("\n")
	}
	for _, res := range r.Results {
		if res.Errors > 0 {
			fmt.Fprintf(&b, "\nerrors: %s at %d clients: %d of %d puts failed, e.g. %s\n",
				res.Server, res.Clients, res.Errors, res.Errors+res.Puts, res.FirstError)
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// writeRatio writes the i-th entry of a ratio line.
func writeRatio(b *bytes.Buffer, i, clients int, value float64) {
	if i > 0 {
		b.WriteString(",")
	}
	fmt.Fprintf(b, " %d clients %.2f (%.0f%%)", clients, value, 100*value)
}

// WriteJSON writes r as one indented JSON document.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// millis formats d in milliseconds with microsecond precision.
func millis(d time.Duration) string {
	return fmt.Sprintf("%.3f", float64(d)/float64(time.Millisecond))
}
