package kv

import (
	"context"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// rpcMetrics records every RPC's duration (and so its count) by method and
// status code, as OTel's rpc.server.call.duration.
type rpcMetrics struct {
	duration metric.Float64Histogram
	mu       sync.RWMutex // guards attrs
	// attrs are the attributes of each method and code seen, made once,
	// as the options Record takes: looking them up by a struct and
	// passing them on allocate nothing, and every call does it.
	attrs map[rpcResult][]metric.RecordOption
}

// rpcResult is how an RPC ended.
type rpcResult struct {
	method string
	code   codes.Code
}

func newRPCMetrics(mp metric.MeterProvider) (*rpcMetrics, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	h, err := mp.Meter("chute/kv").Float64Histogram("rpc.server.call.duration",
		metric.WithDescription("Duration of etcd API calls handled, by method and gRPC status code; its count is the number of calls."),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
	if err != nil {
		return nil, err
	}
	return &rpcMetrics{duration: h, attrs: make(map[rpcResult][]metric.RecordOption)}, nil
}

func (m *rpcMetrics) record(ctx context.Context, fullMethod string, start time.Time, err error) {
	k := rpcResult{method: fullMethod, code: status.Code(err)}
	m.mu.RLock()
	opt, ok := m.attrs[k]
	m.mu.RUnlock()
	if !ok {
		service, method, _ := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
		opt = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(
			attribute.String("rpc.system", "grpc"),
			attribute.String("rpc.service", service),
			attribute.String("rpc.method", method),
			attribute.String("rpc.grpc.status_code", k.code.String()),
		))}
		m.mu.Lock()
		m.attrs[k] = opt
		m.mu.Unlock()
	}
	m.duration.Record(ctx, time.Since(start).Seconds(), opt...)
}

func (m *rpcMetrics) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	m.record(ctx, info.FullMethod, start, err)
	return resp, err
}

func (m *rpcMetrics) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	start := time.Now()
	err := handler(srv, ss)
	m.record(ss.Context(), info.FullMethod, start, err)
	return err
}

// requestSizeLimit refuses unary requests whose encoding exceeds max bytes
// with etcd's "request is too large".
func requestSizeLimit(max int) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if requestSizeOf(ctx, req) > max {
			return nil, toGRPC(ErrRequestTooLarge)
		}
		return handler(ctx, req)
	}
}

// requestSizeOf is requestSize, taken from the arena of a batch
// produce that was decoded into one (its size counted as it was
// decoded), rather than walked again.
func requestSizeOf(ctx context.Context, req any) int {
	if r, ok := req.(*pb.TxnRequest); ok {
		if c := txnCallOf(ctx, r); c != nil && c.arena != nil {
			return c.arena.size
		}
	}
	return requestSize(req)
}

// requestSize is the encoded size of req, 0 for what is not a proto
// message; a batch produce's is summed without proto.Size.
func requestSize(req any) int {
	if r, ok := req.(*pb.TxnRequest); ok {
		if n, ok := putTxnRequestSize(r); ok {
			return n
		}
	}
	if m, ok := req.(proto.Message); ok {
		return proto.Size(m)
	}
	return 0
}
