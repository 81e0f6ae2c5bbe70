package kv

import (
	"encoding/json"
	"fmt"
	"io"

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
type gatewayJSON struct{ *runtime.JSONPb }

func (j gatewayJSON) Unmarshal(data []byte, v any) error {
	if err := checkEnums(data, v); err != nil {
		return err
	}
	return j.JSONPb.Unmarshal(data, v)
}

func (j gatewayJSON) NewDecoder(r io.Reader) runtime.Decoder {
	d := json.NewDecoder(r)
	return runtime.DecoderFunc(func(v any) error {
		var raw json.RawMessage
		if err := d.Decode(&raw); err != nil {
			return err
		}
		return j.Unmarshal(raw, v)
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
