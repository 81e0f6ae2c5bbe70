package peer

import (
	"bytes"
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// h2Frames keeps what each end of a connection wrote, to read its HTTP/2
// frames.
type h2Frames struct {
	mu  sync.Mutex
	buf [2][]byte // [0] from the server, [1] from the client
}

func (f *h2Frames) tap(toServer bool, b []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := 0
	if toServer {
		i = 1
	}
	f.buf[i] = append(f.buf[i], b...)
}

// h2Frame is one frame's header and payload.
type h2Frame struct {
	typ, flags byte
	stream     uint32
	payload    []byte
}

const (
	h2Settings     = 0x4
	h2Ping         = 0x6
	h2WindowUpdate = 0x8
	h2Ack          = 0x1
	h2InitialWin   = 0x4 // SETTINGS_INITIAL_WINDOW_SIZE
)

// frames parses what one end wrote, the client's preface skipped.
func (f *h2Frames) frames(t *testing.T, fromClient bool) []h2Frame {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.buf[0]
	if fromClient {
		b = f.buf[1]
		const preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
		if !bytes.HasPrefix(b, []byte(preface)) {
			t.Fatalf("the client's bytes do not start with the HTTP/2 preface: %q", b[:min(len(b), 24)])
		}
		b = b[len(preface):]
	}
	var out []h2Frame
	for len(b) >= 9 {
		n := int(b[0])<<16 | int(b[1])<<8 | int(b[2])
		if len(b) < 9+n {
			break // cut at the end of the capture
		}
		out = append(out, h2Frame{typ: b[3], flags: b[4], stream: binary.BigEndian.Uint32(b[5:9]) &^ (1 << 31), payload: b[9 : 9+n]})
		b = b[9+n:]
	}
	return out
}

// TestDial_windowsSetNoBDPPings: a peer connection's two ends announce
// StreamWindowBytes and ConnWindowBytes, and calls on it make no ping:
// grpc-go's estimate of the bandwidth-delay product, on by default, pings
// with nearly every message received on a quiet connection (without the
// windows set, each end sent 20 pings over the 20 calls).
func TestDial_windowsSetNoBDPPings(t *testing.T) {
	s := startServer(t)
	var capture h2Frames
	conn, err := Dial(proxy(t, s.Addrs()[0].String(), nil, capture.tap))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(OutgoingContext(context.Background(), 0xc1, 7), 10*time.Second)
	defer cancel()
	client := healthpb.NewHealthClient(conn)
	const calls = 20
	for range calls {
		if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // a quiet link between calls
	}

	for _, end := range []struct {
		name       string
		fromClient bool
	}{{"server", false}, {"client", true}} {
		fs := capture.frames(t, end.fromClient)
		var win, connWin uint32
		var pings int
		for _, fr := range fs {
			switch {
			case fr.typ == h2Settings && fr.flags&h2Ack == 0:
				for p := fr.payload; len(p) >= 6; p = p[6:] {
					if binary.BigEndian.Uint16(p) == h2InitialWin {
						win = binary.BigEndian.Uint32(p[2:])
					}
				}
			case fr.typ == h2WindowUpdate && fr.stream == 0 && connWin == 0:
				connWin = 65535 + binary.BigEndian.Uint32(fr.payload)&^(1<<31)
			case fr.typ == h2Ping && fr.flags&h2Ack == 0:
				pings++
			}
		}
		if win != StreamWindowBytes || connWin != ConnWindowBytes {
			t.Errorf("%s announced a stream window of %d and a connection window of %d, want %d and %d",
				end.name, win, connWin, StreamWindowBytes, ConnWindowBytes)
		}
		if pings != 0 {
			t.Errorf("%s sent %d pings over %d calls, want none", end.name, pings, calls)
		}
	}
}
