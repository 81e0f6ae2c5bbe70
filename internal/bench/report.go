package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// Server labels used by the matrix, and by the chute/no-op ratio.
const (
	ServerChute = "chute"
	ServerNoop  = "no-op"
)

// Report is what `chute bench` prints: the results in run order and, for
// every client count measured against both servers, chute's rate as a
// fraction of the no-op rate.
type Report struct {
	Results []Result `json:"results"`
	Ratios  []Ratio  `json:"ratios,omitempty"`
}

// Ratio is chute's puts/s divided by the no-op server's at one client count.
type Ratio struct {
	Clients      int     `json:"clients"`
	ChutePerNoop float64 `json:"chute_per_noop"`
}

// NewReport returns the report of results, computing the ratios.
func NewReport(results []Result) Report {
	return Report{Results: results, Ratios: ratios(results)}
}

// ratios pairs the ServerChute and ServerNoop results of each client count,
// in the order the client counts first appear.
func ratios(results []Result) []Ratio {
	var out []Ratio
	seen := make(map[int]bool)
	for _, r := range results {
		if seen[r.Clients] {
			continue
		}
		seen[r.Clients] = true
		chute, okC := find(results, ServerChute, r.Clients)
		noop, okN := find(results, ServerNoop, r.Clients)
		if okC && okN && noop.PutsPerSec > 0 {
			out = append(out, Ratio{Clients: r.Clients, ChutePerNoop: chute.PutsPerSec / noop.PutsPerSec})
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
// ratio line when there are ratios, then one line per result that had
// errors.
func (r Report) WriteMarkdown(w io.Writer) error {
	var b bytes.Buffer
	b.WriteString("| clients | conns | server | puts/s | p50 ms | p99 ms |\n")
	b.WriteString("|--------:|------:|--------|-------:|-------:|-------:|\n")
	for _, res := range r.Results {
		fmt.Fprintf(&b, "| %d | %d | %s | %.0f | %s | %s |\n",
			res.Clients, res.Conns, res.Server, res.PutsPerSec, millis(res.P50), millis(res.P99))
	}
	if len(r.Ratios) > 0 {
		b.WriteString("\nchute/no-op puts/s:")
		for i, ra := range r.Ratios {
			sep := ","
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(&b, "%s %d clients %.2f (%.0f%%)", sep, ra.Clients, ra.ChutePerNoop, 100*ra.ChutePerNoop)
		}
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
