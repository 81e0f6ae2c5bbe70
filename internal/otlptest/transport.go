package otlptest

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc/codes"
	_ "google.golang.org/grpc/encoding/gzip" // accept gzip-compressed gRPC messages
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

const (
	// tracesPath is the OTLP/HTTP path for traces.
	tracesPath = "/v1/traces"
	// contentTypeProtobuf is the only OTLP/HTTP encoding accepted.
	contentTypeProtobuf = "application/x-protobuf"
	// maxRequestBytes bounds one request, after decompression, over
	// either protocol.
	maxRequestBytes = 64 << 20
)

var (
	// errTooLarge means a request body is over maxRequestBytes.
	errTooLarge = fmt.Errorf("request body over %d bytes", maxRequestBytes)
	// errUnsupportedEncoding means a Content-Encoding other than identity
	// or gzip.
	errUnsupportedEncoding = errors.New("unsupported Content-Encoding")
)

// traceService is the OTLP/gRPC TraceService.
type traceService struct {
	collectortrace.UnimplementedTraceServiceServer
	r *Receiver
}

var _ collectortrace.TraceServiceServer = traceService{}

// Export keeps req and answers with an empty response.
func (s traceService) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	raw, err := proto.Marshal(req)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "otlptest: re-encode request: %v", err)
	}
	s.r.record(raw, req)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// serveTraces is POST /v1/traces: OTLP/HTTP with protobuf bodies, plain or
// gzip.
func (r *Receiver) serveTraces(w http.ResponseWriter, req *http.Request) {
	mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type"))
	if err != nil || mt != contentTypeProtobuf {
		r.refuse(w, http.StatusUnsupportedMediaType, codes.InvalidArgument,
			fmt.Sprintf("Content-Type %q: want %s", req.Header.Get("Content-Type"), contentTypeProtobuf))
		return
	}
	body, err := readBody(req)
	if err != nil {
		code := http.StatusBadRequest
		switch {
		case errors.Is(err, errUnsupportedEncoding):
			code = http.StatusUnsupportedMediaType
		case errors.Is(err, errTooLarge):
			code = http.StatusRequestEntityTooLarge
		}
		r.refuse(w, code, codes.InvalidArgument, err.Error())
		return
	}
	var msg collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &msg); err != nil {
		r.refuse(w, http.StatusBadRequest, codes.InvalidArgument, fmt.Sprintf("decode ExportTraceServiceRequest: %v", err))
		return
	}
	r.record(body, &msg)
	resp, err := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	if err != nil {
		r.refuse(w, http.StatusInternalServerError, codes.Internal, fmt.Sprintf("encode response: %v", err))
		return
	}
	w.Header().Set("Content-Type", contentTypeProtobuf)
	w.WriteHeader(http.StatusOK)
	w.Write(resp)
}

// readBody reads the whole body, decompressed, at most maxRequestBytes.
func readBody(req *http.Request) ([]byte, error) {
	var src io.Reader = http.MaxBytesReader(nil, req.Body, maxRequestBytes)
	switch enc := req.Header.Get("Content-Encoding"); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(src)
		if err != nil {
			return nil, fmt.Errorf("gzip body: %w", err)
		}
		defer zr.Close()
		src = zr
	default:
		return nil, fmt.Errorf("%w %q: want gzip or none", errUnsupportedEncoding, enc)
	}
	body, err := io.ReadAll(io.LimitReader(src, maxRequestBytes+1))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge) || len(body) > maxRequestBytes:
		return nil, errTooLarge
	case err != nil:
		return nil, fmt.Errorf("read body: %w", err)
	}
	return body, nil
}

// refuse answers an OTLP/HTTP request with status and a protobuf
// google.rpc.Status carrying msg, as the OTLP specification asks, and
// notes msg for the test's log.
func (r *Receiver) refuse(w http.ResponseWriter, httpStatus int, code codes.Code, msg string) {
	r.reject(fmt.Sprintf("OTLP/HTTP %d: %s", httpStatus, msg))
	b, err := proto.Marshal(status.New(code, msg).Proto())
	if err != nil {
		http.Error(w, msg, httpStatus)
		return
	}
	w.Header().Set("Content-Type", contentTypeProtobuf)
	w.WriteHeader(httpStatus)
	w.Write(b)
}
