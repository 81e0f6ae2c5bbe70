package gossip

import (
	"bytes"
	"io"
	"log"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/memberlist"

	"chute/internal/testutil"
)

// held is how long a test watches a closed gate for leaks.
const held = 300 * time.Millisecond

// gatedAt binds a gatedTransport at a free port of ip, for the caller to
// shut down.
func gatedAt(t *testing.T, ip string, logger *log.Logger) (tr *gatedTransport, addr string) {
	t.Helper()
	addr = gossipTestAddr(t, ip)
	host, port := splitTestAddr(t, addr)
	tr, err := newGatedTransport(host, port, logger)
	if err != nil {
		t.Fatal(err)
	}
	return tr, addr
}

// sendUDP sends each datagram to addr.
func sendUDP(t *testing.T, addr string, datagrams ...[]byte) {
	t.Helper()
	pc, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	for _, d := range datagrams {
		if _, err := pc.Write(d); err != nil {
			t.Fatal(err)
		}
	}
}

func splitTestAddr(t *testing.T, addr string) (string, int) {
	t.Helper()
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return host, port
}

// A datagram and a connection that arrive before open reach memberlist's
// channels only after it.
func TestGatedTransport_holdsInboundUntilOpen(t *testing.T) {
	tr, addr := gatedAt(t, "127.0.16.1", log.New(io.Discard, "", 0))
	defer func() {
		if err := tr.Shutdown(); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	}()

	sendUDP(t, addr, []byte("early"))
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	select {
	case p := <-tr.PacketCh():
		t.Fatalf("packet %q handed over before open", p.Buf)
	case c := <-tr.StreamCh():
		_ = c.Close()
		t.Fatal("stream handed over before open")
	case <-time.After(held):
	}

	tr.open()
	select {
	case p := <-tr.PacketCh():
		if string(p.Buf) != "early" {
			t.Errorf("packet %q, want %q", p.Buf, "early")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("held packet not handed over after open")
	}
	select {
	case c := <-tr.StreamCh():
		if got, want := c.RemoteAddr().String(), conn.LocalAddr().String(); got != want {
			t.Errorf("stream from %s, want %s", got, want)
		}
		_ = c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("held stream not handed over after open")
	}
}

// Shutdown returns while a datagram waits at a gate never opened: the
// NetTransport's listener, blocked handing it over, is drained.
func TestGatedTransport_shutdownNeverOpened(t *testing.T) {
	tr, addr := gatedAt(t, "127.0.16.2", log.New(io.Discard, "", 0))
	sendUDP(t, addr, []byte("never"), []byte("never"), []byte("never"))
	time.Sleep(50 * time.Millisecond) // let the listener read one and block
	done := make(chan error, 1)
	go func() { done <- tr.Shutdown() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown blocked")
	}
	if err := tr.Shutdown(); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
}

// aliveAbout encodes memberlist's alive message (type 4, msgpack, behind
// the cluster label) that a member gossips about node name at addr.
func aliveAbout(t *testing.T, label, name, addr string, incarnation uint32) []byte {
	t.Helper()
	host, port := splitTestAddr(t, addr)
	msg := struct {
		Incarnation uint32
		Node        string
		Addr        []byte
		Port        uint16
		Meta        []byte
		Vsn         []uint8
	}{incarnation, name, net.ParseIP(host).To4(), uint16(port), nil, []uint8{1, 5, 2, 0, 0, 0}}
	var buf bytes.Buffer
	buf.WriteByte(4) // aliveMsg
	if err := codec.NewEncoder(&buf, &codec.MsgpackHandle{}).Encode(&msg); err != nil {
		t.Fatal(err)
	}
	out, err := memberlist.AddLabelHeaderToPacket(buf.Bytes(), label)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The restart case: an alive message about this node's previous run,
// with a higher incarnation, is waiting when memberlist starts. Handed
// over after setAlive, memberlist refutes it and stays alive in its own
// list (handled before, it would list itself dead for good).
func TestGatedTransport_aliveAboutUsBeforeCreate(t *testing.T) {
	logs := &testutil.Buffer{}
	logger := log.New(logs, "", 0)
	tr, addr := gatedAt(t, "127.0.17.1", logger)
	sendUDP(t, addr, aliveAbout(t, "test", "x", addr, 7))
	host, port := splitTestAddr(t, addr)

	conf := memberlist.DefaultLocalConfig()
	conf.Name = "x"
	conf.BindAddr, conf.BindPort = host, port
	conf.AdvertiseAddr, conf.AdvertisePort = host, port
	conf.Label = "test"
	conf.Transport = tr
	conf.Logger = logger
	m, err := memberlist.Create(conf)
	if err != nil {
		_ = tr.Shutdown()
		t.Fatal(err)
	}
	defer func() {
		if err := m.Shutdown(); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	}()
	tr.open()

	testutil.EventuallyTrue(t, 5*time.Second, "the alive message about x refuted", func() bool {
		return strings.Contains(logs.String(), "Refuting an alive message for 'x'")
	})
	if st := m.LocalNode().State; st != memberlist.StateAlive {
		t.Errorf("x lists itself %v, want alive; log:\n%s", st, logs)
	}
}
