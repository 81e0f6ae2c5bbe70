package otlptest

import (
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// Span is one received span, flattened: ids in lowercase hex, enums as
// short words, attributes as Go values.
//
// Attribute values are string, bool, int64, float64, []byte, []any (an
// array, of these same types) or map[string]any (a key/value list); an
// empty value is nil.
type Span struct {
	TraceID      string // 32 hex digits
	SpanID       string // 16 hex digits
	ParentSpanID string // 16 hex digits; empty for a root span
	TraceState   string // W3C tracestate; usually empty
	Name         string
	// Kind is "internal", "server", "client", "producer", "consumer" or
	// "unspecified".
	Kind       string
	Start, End time.Time // UTC; zero when the exporter sent 0
	Attrs      map[string]any
	// Resource is the attributes of the span's resource, such as
	// "service.name".
	Resource     map[string]any
	Scope        string // instrumentation scope name: the tracer's name
	ScopeVersion string
	// StatusCode is "unset", "ok" or "error".
	StatusCode    string
	StatusMessage string
	Events        []Event
	Links         []Link
}

// Event is one event of a Span.
type Event struct {
	Name  string
	Time  time.Time // UTC
	Attrs map[string]any
}

// Link is one link of a Span to another span.
type Link struct {
	TraceID, SpanID string // hex
	Attrs           map[string]any
}

// Attr is the span attribute key, or nil when the span has none.
func (s Span) Attr(key string) any { return s.Attrs[key] }

// Event returns the first event named name and whether there is one.
func (s Span) Event(name string) (Event, bool) {
	for _, e := range s.Events {
		if e.Name == name {
			return e, true
		}
	}
	return Event{}, false
}

// String describes the span on one line for failure messages, for
// example:
//
//	"GET /x" server trace=4bf9...4736 span=00f0...02b7 parent=- 12ms status=error "boom" attrs={http.status=500} events=[exception] links=0 service="api"
func (s Span) String() string {
	var b strings.Builder
	parent := s.ParentSpanID
	if parent == "" {
		parent = "-"
	}
	fmt.Fprintf(&b, "%q %s trace=%s span=%s parent=%s %v status=%s",
		s.Name, s.Kind, s.TraceID, s.SpanID, parent, s.End.Sub(s.Start), s.StatusCode)
	if s.StatusMessage != "" {
		fmt.Fprintf(&b, " %q", s.StatusMessage)
	}
	b.WriteString(" attrs=")
	writeAttrs(&b, s.Attrs)
	b.WriteString(" events=[")
	for i, e := range s.Events {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(e.Name)
	}
	fmt.Fprintf(&b, "] links=%d service=%s", len(s.Links), formatValue(s.Resource["service.name"]))
	return b.String()
}

// writeAttrs writes attrs as {k=v, ...}, keys sorted.
func writeAttrs(b *strings.Builder, attrs map[string]any) {
	b.WriteString("{")
	for i, k := range slices.Sorted(maps.Keys(attrs)) {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k)
		b.WriteString("=")
		b.WriteString(formatValue(attrs[k]))
	}
	b.WriteString("}")
}

// formatValue writes strings quoted and everything else with %v.
func formatValue(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%v", v)
}

// flatten turns one request into spans in the order they were sent.
func flatten(req *collectortrace.ExportTraceServiceRequest) []Span {
	var out []Span
	for _, rs := range req.GetResourceSpans() {
		resource := attrMap(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s := Span{
					TraceID:       hex.EncodeToString(sp.GetTraceId()),
					SpanID:        hex.EncodeToString(sp.GetSpanId()),
					ParentSpanID:  hex.EncodeToString(sp.GetParentSpanId()),
					TraceState:    sp.GetTraceState(),
					Name:          sp.GetName(),
					Kind:          kindName(sp.GetKind()),
					Start:         unixNano(sp.GetStartTimeUnixNano()),
					End:           unixNano(sp.GetEndTimeUnixNano()),
					Attrs:         attrMap(sp.GetAttributes()),
					Resource:      cloneAttrs(resource),
					Scope:         ss.GetScope().GetName(),
					ScopeVersion:  ss.GetScope().GetVersion(),
					StatusCode:    statusName(sp.GetStatus().GetCode()),
					StatusMessage: sp.GetStatus().GetMessage(),
				}
				for _, e := range sp.GetEvents() {
					s.Events = append(s.Events, Event{
						Name:  e.GetName(),
						Time:  unixNano(e.GetTimeUnixNano()),
						Attrs: attrMap(e.GetAttributes()),
					})
				}
				for _, l := range sp.GetLinks() {
					s.Links = append(s.Links, Link{
						TraceID: hex.EncodeToString(l.GetTraceId()),
						SpanID:  hex.EncodeToString(l.GetSpanId()),
						Attrs:   attrMap(l.GetAttributes()),
					})
				}
				out = append(out, s)
			}
		}
	}
	return out
}

func kindName(k tracepb.Span_SpanKind) string {
	switch k {
	case tracepb.Span_SPAN_KIND_INTERNAL:
		return "internal"
	case tracepb.Span_SPAN_KIND_SERVER:
		return "server"
	case tracepb.Span_SPAN_KIND_CLIENT:
		return "client"
	case tracepb.Span_SPAN_KIND_PRODUCER:
		return "producer"
	case tracepb.Span_SPAN_KIND_CONSUMER:
		return "consumer"
	case tracepb.Span_SPAN_KIND_UNSPECIFIED:
		return "unspecified"
	}
	return fmt.Sprintf("kind(%d)", int32(k))
}

func statusName(c tracepb.Status_StatusCode) string {
	switch c {
	case tracepb.Status_STATUS_CODE_UNSET:
		return "unset"
	case tracepb.Status_STATUS_CODE_OK:
		return "ok"
	case tracepb.Status_STATUS_CODE_ERROR:
		return "error"
	}
	return fmt.Sprintf("status(%d)", int32(c))
}

// unixNano is ns since the epoch in UTC; 0 is the zero time.
func unixNano(ns uint64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(ns)).UTC()
}

// attrMap flattens key/value pairs; nil for none. A repeated key keeps its
// last value.
func attrMap(kvs []*commonpb.KeyValue) map[string]any {
	if len(kvs) == 0 {
		return nil
	}
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = anyValue(kv.GetValue())
	}
	return m
}

// anyValue is v as a Go value; see Span. The profiles-only string table
// index has no meaning in traces and becomes nil.
func anyValue(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BytesValue:
		return slices.Clone(x.BytesValue)
	case *commonpb.AnyValue_ArrayValue:
		vals := x.ArrayValue.GetValues()
		out := make([]any, len(vals))
		for i, e := range vals {
			out[i] = anyValue(e)
		}
		return out
	case *commonpb.AnyValue_KvlistValue:
		m := attrMap(x.KvlistValue.GetValues())
		if m == nil {
			m = map[string]any{}
		}
		return m
	}
	return nil
}

// clone is a deep copy of s.
func (s Span) clone() Span {
	s.Attrs = cloneAttrs(s.Attrs)
	s.Resource = cloneAttrs(s.Resource)
	s.Events = slices.Clone(s.Events)
	for i := range s.Events {
		s.Events[i].Attrs = cloneAttrs(s.Events[i].Attrs)
	}
	s.Links = slices.Clone(s.Links)
	for i := range s.Links {
		s.Links[i].Attrs = cloneAttrs(s.Links[i].Attrs)
	}
	return s
}

func cloneAttrs(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v any) any {
	switch x := v.(type) {
	case []byte:
		return slices.Clone(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cloneValue(e)
		}
		return out
	case map[string]any:
		return cloneAttrs(x)
	}
	return v
}
