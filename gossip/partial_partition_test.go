package gossip

import (
	"errors"
	"fmt"
	"log"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"chute/internal/testutil"
)

// cutTransport is a gatedTransport that drops what it sends to one
// address, as a cut link does: datagrams vanish, connections fail.
type cutTransport struct {
	*gatedTransport
	mu  sync.Mutex
	cut string // host:port dropped; "" none
}

var _ memberlist.NodeAwareTransport = (*cutTransport)(nil)

var errCut = errors.New("link cut")

func (c *cutTransport) setCut(addr string) {
	c.mu.Lock()
	c.cut = addr
	c.mu.Unlock()
}

func (c *cutTransport) isCut(addr string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cut != "" && c.cut == addr
}

func (c *cutTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if c.isCut(addr) {
		return time.Now(), nil
	}
	return c.gatedTransport.WriteTo(b, addr)
}

func (c *cutTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if c.isCut(a.Addr) {
		return time.Now(), nil
	}
	return c.gatedTransport.WriteToAddress(b, a)
}

func (c *cutTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	if c.isCut(addr) {
		return nil, errCut
	}
	return c.gatedTransport.DialTimeout(addr, timeout)
}

func (c *cutTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if c.isCut(a.Addr) {
		return nil, errCut
	}
	return c.gatedTransport.DialAddressTimeout(a, timeout)
}

// lineLog keeps what memberlist logs.
type lineLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.lines = append(l.lines, strings.TrimSpace(string(p)))
	l.mu.Unlock()
	return len(p), nil
}

func (l *lineLog) matching(sub string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			out = append(out, s)
		}
	}
	return out
}

type cutNode struct {
	name string
	addr string
	ml   *memberlist.Memberlist
	tr   *cutTransport
	log  *lineLog
}

// cutTrio starts a, b and c on 127.0.<net>.1-3 as chute configures
// memberlist (Config.serfConfig with Fast timings, gatedTransport), then
// changed by tune, each sending through a cutTransport, and waits until
// every one lists all three alive.
func cutTrio(t *testing.T, net int, tune func(*memberlist.Config)) (a, b, c *cutNode) {
	t.Helper()
	var nodes []*cutNode
	for i, name := range []string{"a", "b", "c"} {
		addr := gossipTestAddr(t, fmt.Sprintf("127.0.%d.%d", net, i+1))
		host, port := splitTestAddr(t, addr)
		cfg := DefaultConfig()
		cfg.Name, cfg.Cluster, cfg.BindAddr, cfg.Fast = name, "test", addr, true
		lines := &lineLog{}
		logger := log.New(lines, "", 0)
		ml := cfg.serfConfig(resolvedAddr{host, port}, resolvedAddr{host, port}, nil, nil, logger).MemberlistConfig
		ml.Name = name
		tune(ml)
		gt, err := newGatedTransport(host, port, logger)
		if err != nil {
			t.Fatal(err)
		}
		tr := &cutTransport{gatedTransport: gt}
		ml.Transport = tr
		m, err := memberlist.Create(ml)
		if err != nil {
			_ = gt.Shutdown()
			t.Fatal(err)
		}
		gt.open()
		t.Cleanup(func() { _ = m.Shutdown() })
		nodes = append(nodes, &cutNode{name: name, addr: addr, ml: m, tr: tr, log: lines})
	}
	for _, n := range nodes[1:] {
		if _, err := n.ml.Join([]string{nodes[0].addr}); err != nil {
			t.Fatalf("%s joins a: %v", n.name, err)
		}
	}
	testutil.EventuallyTrue(t, settle, "a, b and c alive everywhere", func() bool {
		for _, n := range nodes {
			if n.ml.NumMembers() != 3 {
				return false
			}
			for _, m := range n.ml.Members() {
				if m.State != memberlist.StateAlive {
					return false
				}
			}
		}
		return true
	})
	return nodes[0], nodes[1], nodes[2]
}

// With the link a-b cut both ways and c reaching both, each of a and b
// probes the other through c, and neither suspects the other. memberlist
// asks IndirectChecks members to relay a probe and, below 3*IndirectChecks
// members, tries every member in turn; with DefaultLocalConfig's single
// relay it draws at random, 3*n draws that miss c (2/3)^9 = 2.6% of the
// time: no relay is asked, and the probed node is suspected. The fast
// profile's 100 ms probe round is given 1 s here (500 ms for the direct
// ack): the relayed ack must beat it, and under make test's load a round
// of 100 ms missed it for a quarter of the probes (CI), whereas a missed
// relay fails the probe whatever its time. At one probe of b by a every
// 2 s, 30 trios make 300 probes in 10 s, about 8 suspicions with one relay
// (a pass by chance e^-7.8 = 0.04% of the time).
func TestMembership_partialPartition_indirectProbesKeepAlive(t *testing.T) {
	const (
		trios = 30
		cut   = 10 * time.Second
	)
	slowRounds := func(ml *memberlist.Config) {
		ml.ProbeInterval = time.Second
		ml.ProbeTimeout = 500 * time.Millisecond
		ml.GossipInterval = 200 * time.Millisecond
	}
	type pair struct{ a, b *cutNode }
	var pairs []pair
	for i := range trios {
		a, b, _ := cutTrio(t, 100+i, slowRounds)
		pairs = append(pairs, pair{a, b})
	}
	for _, p := range pairs {
		p.a.tr.setCut(p.b.addr)
		p.b.tr.setCut(p.a.addr)
	}
	time.Sleep(cut)
	var suspicions []string
	for i, p := range pairs {
		for _, n := range []struct {
			from  *cutNode
			other string
		}{{p.a, "b"}, {p.b, "a"}} {
			for _, l := range n.from.log.matching("Suspect " + n.other + " has failed") {
				suspicions = append(suspicions, fmt.Sprintf("trio %d, %s: %s", i, n.from.name, l))
			}
			for _, l := range n.from.log.matching("Marking " + n.other + " as failed") {
				suspicions = append(suspicions, fmt.Sprintf("trio %d, %s: %s", i, n.from.name, l))
			}
		}
	}
	if len(suspicions) > 0 {
		t.Errorf("with a-b cut and c relaying, %d suspicions in %v over %d trios:\n%s",
			len(suspicions), cut, trios, strings.Join(suspicions, "\n"))
	}
}
