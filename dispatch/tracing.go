package dispatch

import (
	"context"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"chute/gossip"
	"chute/otel"
	"chute/sink"
)

// msgTrace is the trace of the put that produced a message: the span its
// batch's clickhouse.insert span continues or links to, and when the
// message was queued, so the batch shows how long its rows waited. The
// messages of one produce call share one; untraced messages have none.
type msgTrace struct {
	sc     trace.SpanContext
	queued time.Time
}

// maxInsertLinks bounds the links of one clickhouse.insert span: a batch of
// 100,000 traced rows links to the first puts only.
const maxInsertLinks = 128

// putTrace returns the trace of a put whose handler runs with ctx, nil when
// tracing is off or the put is not sampled.
func (m *Manager) putTrace(ctx context.Context) *msgTrace {
	if m.tracer == nil {
		return nil
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsSampled() {
		return nil
	}
	return &msgTrace{sc: sc, queued: m.clock.Now()}
}

// queueAttrs are the attributes of a span about messages of one queue.
func queueAttrs(name string, n int) []attribute.KeyValue {
	return []attribute.KeyValue{
		semconv.MessagingSystemKey.String("chute"),
		semconv.MessagingDestinationName(name),
		semconv.MessagingBatchMessageCount(n),
	}
}

// startForward starts the sender's span of a forward to the dispatcher and
// returns it with its traceparent for the peer message; a nil span and ""
// when the put is not traced.
func (m *Manager) startForward(ctx context.Context, name string, member uint64, n int) (trace.Span, string) {
	if m.tracer == nil || !trace.SpanContextFromContext(ctx).IsSampled() {
		return nil, ""
	}
	_, span := m.tracer.Start(ctx, "chute.forward "+name, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(append(queueAttrs(name, n), attribute.String("chute.dispatcher", gossip.ID(member).String()))...))
	return span, otel.TraceParent(span.SpanContext())
}

// acceptSpan starts the dispatcher's span of a forwarded batch, the child
// of the sender's forward span, and returns it with the trace its messages
// carry; nil and nil when the batch is not traced.
func (m *Manager) acceptSpan(traceparent string, name string, n int) (trace.Span, *msgTrace) {
	if m.tracer == nil || traceparent == "" {
		return nil, nil
	}
	parent := otel.ParseTraceParent(traceparent)
	if !parent.IsValid() {
		return nil, nil
	}
	_, span := m.tracer.Start(trace.ContextWithRemoteSpanContext(context.Background(), parent), "chute.enqueue "+name,
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(queueAttrs(name, n)...))
	if !span.SpanContext().IsSampled() {
		return span, nil
	}
	return span, &msgTrace{sc: span.SpanContext(), queued: m.clock.Now()}
}

// endSpan ends a span (nil: none) with the outcome err.
func endSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// tracesOf returns the traces of rows, in their order (nil for a row not
// traced), or nil when none is.
func (q *queue) tracesOf(rows []row) []*msgTrace {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.traces) == 0 {
		return nil
	}
	out := make([]*msgTrace, len(rows))
	for i, r := range rows {
		out[i] = q.traces[r.seq]
	}
	return out
}

// startInsert starts a batch's clickhouse.insert span: the child of the
// first traced put it carries (one trace then holds a put and its insert),
// linked to the others, each link saying how long its rows waited. Nil
// when tracing is off.
func (d *drainer) startInsert(rows []row, bytes int, db string, ep sink.Endpoint, now time.Time) trace.Span {
	m := d.m
	if m.tracer == nil {
		return nil
	}
	ctx := context.Background()
	var links []trace.Link
	var last *msgTrace
	var oldest time.Time
	for _, tr := range d.q.tracesOf(rows) {
		if tr == nil || tr == last {
			continue
		}
		if last == nil {
			ctx = trace.ContextWithSpanContext(ctx, tr.sc)
			oldest = tr.queued
		} else if len(links) < maxInsertLinks {
			links = append(links, trace.Link{SpanContext: tr.sc, Attributes: []attribute.KeyValue{
				attribute.Float64("chute.queue.wait", now.Sub(tr.queued).Seconds()),
			}})
		}
		last = tr
	}
	host, port := ep.Host(), ep.Port()
	attrs := []attribute.KeyValue{
		semconv.DBSystemNameClickHouse,
		semconv.DBNamespace(db),
		semconv.DBCollectionName(d.table),
		semconv.DBOperationName("INSERT"),
		semconv.DBOperationBatchSize(len(rows)),
		semconv.ServerAddress(host),
		semconv.MessagingDestinationName(d.q.name),
		attribute.Int("chute.batch.rows", len(rows)),
		attribute.Int("chute.batch.bytes", bytes),
		attribute.Int64("chute.batch.first_seq", int64(rows[0].seq)),
		attribute.Int64("chute.batch.last_seq", int64(rows[len(rows)-1].seq)),
	}
	if port > 0 {
		attrs = append(attrs, semconv.ServerPort(port))
	}
	if !oldest.IsZero() {
		attrs = append(attrs, attribute.Float64("chute.queue.wait", now.Sub(oldest).Seconds()))
	}
	_, span := m.tracer.Start(ctx, "INSERT "+d.table, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithLinks(links...), trace.WithAttributes(attrs...), trace.WithTimestamp(now))
	return span
}

// insertAttempt records one failed attempt of a batch as an event of its
// span.
func insertAttempt(span trace.Span, name string, attempt int, rows int, res sink.Result) {
	if span == nil {
		return
	}
	span.AddEvent(name, trace.WithAttributes(
		attribute.Int("chute.insert.attempt", attempt),
		attribute.Int("chute.batch.rows", rows),
		semconv.ErrorTypeKey.String(errorType(res)),
		semconv.HTTPResponseStatusCode(res.Status),
		semconv.DBResponseStatusCode(strconv.Itoa(res.Code)),
		attribute.String("exception.message", res.Message),
	))
}

// endInsert ends a batch's span with its outcome: the last answer, how
// many attempts it took, and an error status unless every row landed.
func endInsert(span trace.Span, attempts int, res sink.Result, deadLetters int) {
	if span == nil {
		return
	}
	span.SetAttributes(
		attribute.Int("chute.insert.attempts", attempts),
		attribute.Int("chute.insert.retries", attempts-1),
		attribute.Int("chute.batch.dead_letters", deadLetters),
		attribute.String("chute.insert.outcome", res.Class.String()),
	)
	if res.Status != 0 {
		span.SetAttributes(semconv.HTTPResponseStatusCode(res.Status))
	}
	switch {
	case res.Class == sink.ClassOK && deadLetters == 0:
		span.SetStatus(codes.Ok, "")
	case res.Class == sink.ClassOK:
		span.SetAttributes(semconv.ErrorTypeKey.String("dead_letters"))
		span.SetStatus(codes.Error, strconv.Itoa(deadLetters)+" rows refused, stored as dead letters")
	default:
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType(res)), semconv.DBResponseStatusCode(strconv.Itoa(res.Code)))
		span.SetStatus(codes.Error, res.Message)
	}
	span.End()
}

// errorType is error.type for a failed insert: ClickHouse's exception code,
// the HTTP status, or the transport failure.
func errorType(res sink.Result) string {
	switch {
	case res.Code != 0:
		return strconv.Itoa(res.Code)
	case res.Err != nil:
		return "transport"
	case res.Status != 0:
		return strconv.Itoa(res.Status)
	}
	return res.Class.String()
}
