package bench

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func sampleResults() []Result {
	return []Result{
		{Server: ServerNoop, Clients: 1, Conns: 1, KeySize: 16, ValSize: 256, Puts: 1000, Elapsed: time.Second, PutsPerSec: 1000, P50: 900 * time.Microsecond, P99: 2 * time.Millisecond},
		{Server: ServerChute, Clients: 1, Conns: 1, KeySize: 16, ValSize: 256, Puts: 1000, Elapsed: 2 * time.Second, PutsPerSec: 500, P50: 1800 * time.Microsecond, P99: 4 * time.Millisecond},
		{Server: ServerNoop, Clients: 100, Conns: 10, KeySize: 16, ValSize: 256, Puts: 100000, Elapsed: 2 * time.Second, PutsPerSec: 50000, P50: 1500 * time.Microsecond, P99: 6 * time.Millisecond},
		{Server: ServerChute, Clients: 100, Conns: 10, KeySize: 16, ValSize: 256, Puts: 99990, Errors: 10, FirstError: "boom", Elapsed: 2 * time.Second, PutsPerSec: 45000, P50: 1700 * time.Microsecond, P99: 7 * time.Millisecond},
	}
}

func TestReport_WriteMarkdown(t *testing.T) {
	var b bytes.Buffer
	if err := NewReport(sampleResults()).WriteMarkdown(&b); err != nil {
		t.Fatalf("WriteMarkdown: %v", err)
	}
	out := b.String()
	lines := strings.Split(out, "\n")
	if got, want := lines[0], "| clients | conns | server | puts/s | p50 ms | p99 ms |"; got != want {
		t.Errorf("header: got %q, want %q", got, want)
	}
	rows := 0
	for _, l := range lines[2:] {
		if strings.HasPrefix(l, "| ") {
			rows++
		}
	}
	if rows != 4 {
		t.Errorf("rows: got %d, want 4 in\n%s", rows, out)
	}
	for _, want := range []string{
		"| 1 | 1 | no-op | 1000 | 0.900 | 2.000 |",
		"| 100 | 10 | chute | 45000 | 1.700 | 7.000 |",
		"chute/no-op puts/s: 1 clients 0.50 (50%), 100 clients 0.90 (90%)",
		"errors: chute at 100 clients: 10 of 100000 puts failed, e.g. boom",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
}

// tracedResults are sampleResults with a traced chute node at both client
// counts.
func tracedResults() []Result {
	rs := sampleResults()
	traced := []Result{
		{Server: ServerChuteTraced, Clients: 1, Conns: 1, KeySize: 16, ValSize: 256, Puts: 1000, Elapsed: 2500 * time.Millisecond, PutsPerSec: 400,
			P50: 2 * time.Millisecond, P99: 5 * time.Millisecond, Trace: &TraceCount{Spans: 2001, Calls: 2001}},
		{Server: ServerChuteTraced, Clients: 100, Conns: 10, KeySize: 16, ValSize: 256, Puts: 100000, Elapsed: 2 * time.Second, PutsPerSec: 36000,
			P50: 2 * time.Millisecond, P99: 8 * time.Millisecond, Trace: &TraceCount{Spans: 90000, Calls: 101010}},
	}
	return []Result{rs[0], rs[1], traced[0], rs[2], rs[3], traced[1]}
}

func TestReport_WriteMarkdown_traced(t *testing.T) {
	var b bytes.Buffer
	rep := NewReport(tracedResults())
	if err := rep.WriteMarkdown(&b); err != nil {
		t.Fatalf("WriteMarkdown: %v", err)
	}
	out := b.String()
	for _, want := range []string{
		"| 1 | 1 | chute, traced 100% | 400 | 2.000 | 5.000 |\n| 100 | 10 | no-op |",
		"| 100 | 10 | chute, traced 100% | 36000 | 2.000 | 8.000 |",
		"\nchute/no-op puts/s: 1 clients 0.50 (50%), 100 clients 0.90 (90%)\n" +
			"traced/untraced chute puts/s: 1 clients 0.80 (80%), 100 clients 0.80 (80%)\n" +
			"spans received by the bench's OTLP sink: 1 clients 2001 for 2001 KV calls, 100 clients 90000 for 101010 KV calls\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
	if len(rep.Ratios) != 2 {
		t.Errorf("ratios: got %+v, want chute/no-op at 1 and 100 clients only", rep.Ratios)
	}
}

func TestReport_WriteMarkdown_singleServer(t *testing.T) {
	var b bytes.Buffer
	r := NewReport([]Result{{Server: "127.0.0.1:2379", Clients: 4, Conns: 2, PutsPerSec: 10}})
	if err := r.WriteMarkdown(&b); err != nil {
		t.Fatalf("WriteMarkdown: %v", err)
	}
	if strings.Contains(b.String(), "chute/no-op") || strings.Contains(b.String(), "errors:") ||
		strings.Contains(b.String(), "traced") || strings.Contains(b.String(), "spans") {
		t.Errorf("got ratio or error lines for a single clean result:\n%s", b.String())
	}
}

func TestReport_WriteJSON_roundTrip(t *testing.T) {
	want := NewReport(tracedResults())
	var b bytes.Buffer
	if err := want.WriteJSON(&b); err != nil {
		t.Fatalf("WriteJSON: %v", err)
	}
	var got Report
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("Unmarshal: %v\n%s", err, b.String())
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip: got %+v, want %+v", got, want)
	}
	if len(got.Ratios) != 2 || got.Ratios[1].Clients != 100 || got.Ratios[1].ChutePerNoop != 0.9 {
		t.Errorf("ratios: got %+v, want 1 -> 0.5 and 100 -> 0.9", got.Ratios)
	}
	if len(got.Tracing) != 2 || got.Tracing[1].Clients != 100 || got.Tracing[1].TracedPerUntraced != 0.8 {
		t.Errorf("tracing: got %+v, want 1 -> 0.8 and 100 -> 0.8", got.Tracing)
	}
	if s := b.String(); !strings.Contains(s, `"trace": {`) || !strings.Contains(s, `"spans": 90000`) || !strings.Contains(s, `"traced_per_untraced": 0.8`) {
		t.Errorf("JSON lacks the trace fields:\n%s", s)
	}
	if n := strings.Count(b.String(), `"trace"`); n != 2 {
		t.Errorf("JSON: got %d trace objects, want 2 (untraced runs have none)", n)
	}
}
