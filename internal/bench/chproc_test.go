package bench

import (
	"errors"
	"net"
	"os"
	"runtime"
	"slices"
	"testing"
)

func TestListenInodes(t *testing.T) {
	table := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		"   0: 0100007F:46A4 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 111 1 0 100 0 0 10 0\n" +
		"   1: 0100007F:46A4 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1000        0 222 1 0 20 4 30 10 -1\n" +
		"   2: 00000000:46A5 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 333 1 0 100 0 0 10 0\n" +
		"   3: 00000000000000000000000000000000:46A4 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000 1000 0 444 1\n" +
		"   4: short\n"
	got := listenInodes([]byte(table), 0x46A4)
	if want := []string{"111", "444"}; !slices.Equal(got, want) {
		t.Errorf("listenInodes: got %q, want %q (listening on 18084, not the connection nor the other port)", got, want)
	}
	if got := listenInodes([]byte(table), 1); len(got) != 0 {
		t.Errorf("listenInodes of a port nobody listens on: got %q, want none", got)
	}
}

func TestListenerPID_self(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Fatalf("listenerPID reads Linux's /proc; this test runs on Linux only (GOOS %s)", runtime.GOOS)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	got, err := listenerPID(port)
	if err != nil || got != os.Getpid() {
		t.Errorf("listenerPID(%d): got %d, %v; want this process, %d", port, got, err, os.Getpid())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := listenerPID(port); !errors.Is(err, errNoListener) {
		t.Errorf("listenerPID of a closed port: got %d, %v; want errNoListener", got, err)
	}
}

func TestClickHousePID(t *testing.T) {
	if got, err := clickHousePID(42, "http://127.0.0.1:1"); got != 42 || err != nil {
		t.Errorf("clickHousePID with a pid: got %d, %v; want 42", got, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got, err := clickHousePID(0, "http://"+l.Addr().String()); got != os.Getpid() || err != nil {
		t.Errorf("clickHousePID by port: got %d, %v; want this process, %d", got, err, os.Getpid())
	}
	if _, err := clickHousePID(0, "ftp://x"); err == nil {
		t.Errorf("clickHousePID of a bad URL: got no error")
	}
}

func TestSideProcs(t *testing.T) {
	if got := sideProcs(0); len(got) != 1 || got[0] != (proc{name: procClient, pid: os.Getpid()}) {
		t.Errorf("sideProcs(0): got %+v, want the client alone", got)
	}
	if got := sideProcs(7); len(got) != 2 || got[1] != (proc{name: procClickHouse, pid: 7}) {
		t.Errorf("sideProcs(7): got %+v, want the client and ClickHouse 7", got)
	}
}
