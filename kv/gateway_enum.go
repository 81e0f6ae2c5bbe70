package kv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// gatewayJSON is the gateway's JSON: protojson with unknown fields
// ignored, as etcd 3.4's gateway ignores them, but an enum name that is
// not one refused (checkEnums), as etcd refuses it. protojson's
// DiscardUnknown drops unknown enum names too: a compare whose "result"
// was misspelled became EQUAL, and a txn meant as "delete k unless its
// value is a" deleted k.
// maxValue bounds each JSON value decoded from a body (a stream's
// requests each, a unary call's one), 0 for none.
type gatewayJSON struct {
	*runtime.JSONPb
	maxValue int64
}

func (j gatewayJSON) Unmarshal(data []byte, v any) error {
	if err := checkEnums(data, v); err != nil {
		return err
	}
	return j.JSONPb.Unmarshal(data, v)
}

// NewDecoder decodes r's JSON values one after another, each within
// maxValue bytes: a stream (watch, keep-alive) is bounded per request,
// as etcd's, not as a whole, which dropped every request of a
// long-lived stream past a few MiB in all.
func (j gatewayJSON) NewDecoder(r io.Reader) runtime.Decoder {
	lr := &valueLimit{r: r, max: j.maxValue}
	d := json.NewDecoder(lr)
	return runtime.DecoderFunc(func(v any) error {
		lr.start = d.InputOffset()
		var raw json.RawMessage
		if err := d.Decode(&raw); err != nil {
			if lr.over {
				return status.Error(codes.InvalidArgument, fmt.Sprintf("etcdserver: request is too large (a JSON request of more than %d bytes)", j.maxValue))
			}
			return err
		}
		return j.Unmarshal(raw, v)
	})
}

// valueLimit reads r, failing once more than max bytes were read past
// start, the offset at which the value being decoded began (the decoder
// reads ahead of it by a buffer at most).
type valueLimit struct {
	r     io.Reader
	max   int64
	read  int64
	start int64
	over  bool
}

func (l *valueLimit) Read(p []byte) (int, error) {
	if l.max > 0 && l.read-l.start > l.max {
		l.over = true
		return 0, errValueTooLarge
	}
	n, err := l.r.Read(p)
	l.read += int64(n)
	return n, err
}

var errValueTooLarge = errors.New("kv: gateway request too large")

// streamEntry answers a stream's first request that does not decode
// (newReq's message from its first JSON value) at once with the error, as
// etcd's gateway does, and hands the stream on otherwise, that value
// first. The generated handler closed the stream's send side on it and
// waited for an answer that never came: the client waited for ever.
func streamEntry(next http.Handler, m gatewayJSON, newReq func() proto.Message) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		// A stream answers while its body is still coming: Go's HTTP/1
		// server otherwise reads the rest of the body before the first
		// answer, and a watch whose client keeps its body open (curl -d
		// @- from a pipe) was never answered, not even created.
		_ = http.NewResponseController(w).EnableFullDuplex()
		body := r.Body
		var buf bytes.Buffer
		dec := m.NewDecoder(io.TeeReader(body, &buf))
		if err := dec.Decode(newReq()); err != nil && !errors.Is(err, io.EOF) {
			st, ok := status.FromError(err)
			if !ok {
				st = status.New(codes.InvalidArgument, "Failed to decode request: "+err.Error())
			}
			gatewayError(r.Context(), nil, nil, w, r, st.Err())
			return
		}
		r = r.Clone(r.Context())
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(&buf, body), body}
		next.ServeHTTP(w, r)
	})
}

// checkEnums refuses data, the JSON of message v, when a field of an enum
// type (at any depth) holds a name its enum does not have. What is not a
// message, or not JSON, is left to the decoder.
func checkEnums(data []byte, v any) error {
	var m proto.Message
	switch x := v.(type) {
	case proto.Message:
		m = x
	case protoadapt.MessageV1:
		m = protoadapt.MessageV2Of(x)
	default:
		return nil
	}
	var doc any
	if json.Unmarshal(data, &doc) != nil {
		return nil
	}
	return enumsOf(doc, m.ProtoReflect().Descriptor(), 0)
}

// maxEnumDepth bounds checkEnums' walk: etcd's messages nest a few deep
// (a txn in a txn), and a body's depth is the client's.
const maxEnumDepth = 64

func enumsOf(doc any, md protoreflect.MessageDescriptor, depth int) error {
	obj, ok := doc.(map[string]any)
	if !ok || depth > maxEnumDepth {
		return nil
	}
	fields := md.Fields()
	for k, val := range obj {
		fd := fields.ByJSONName(k)
		if fd == nil {
			fd = fields.ByName(protoreflect.Name(k))
		}
		if fd == nil || fd.IsMap() {
			continue
		}
		items := []any{val}
		if list, ok := val.([]any); ok && fd.IsList() {
			items = list
		}
		for _, it := range items {
			switch fd.Kind() {
			case protoreflect.EnumKind:
				if name, ok := it.(string); ok && fd.Enum().Values().ByName(protoreflect.Name(name)) == nil {
					return status.Error(codes.InvalidArgument, fmt.Sprintf("unknown value %q for enum %s", name, fd.Enum().FullName()))
				}
			case protoreflect.MessageKind, protoreflect.GroupKind:
				if err := enumsOf(it, fd.Message(), depth+1); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
