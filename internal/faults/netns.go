package faults

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"
)

// NetworkConfig configures a Network. Build it with
// DefaultNetworkConfig and set Name.
type NetworkConfig struct {
	// Name prefixes the network namespaces the network creates
	// (<Name>-hub, <Name>-0, ...); it must be unique on the host while
	// the network lives, such as the test process's pid and a counter.
	// At most 40 characters of [a-z0-9-]. Required.
	Name string
	// Nodes is how many node namespaces there are. Zero: 3.
	Nodes int
	// Subnet is the first three octets of the /24 the namespaces share,
	// such as "10.201.0". The addresses exist only inside the network's
	// namespaces, so any subnet will do. Zero: "10.201.0".
	Subnet string
	// IP is the path of iproute2's ip. Zero: "ip" on $PATH.
	IP string
	// CommandTimeout bounds each ip command. Zero: 10s.
	CommandTimeout time.Duration
}

// DefaultNetworkConfig returns three nodes on 10.201.0.0/24. Name is
// left to the caller.
func DefaultNetworkConfig() NetworkConfig {
	return NetworkConfig{Nodes: 3, Subnet: "10.201.0", IP: "ip", CommandTimeout: 10 * time.Second}
}

func (c NetworkConfig) withDefaults() NetworkConfig {
	d := DefaultNetworkConfig()
	if c.Nodes == 0 {
		c.Nodes = d.Nodes
	}
	if c.Subnet == "" {
		c.Subnet = d.Subnet
	}
	if c.IP == "" {
		c.IP = d.IP
	}
	if c.CommandTimeout == 0 {
		c.CommandTimeout = d.CommandTimeout
	}
	return c
}

// Validate reports a config NewNetwork would refuse.
func (c NetworkConfig) Validate() error {
	var errs []error
	if c.Name == "" || len(c.Name) > 40 || strings.Trim(c.Name, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
		errs = append(errs, fmt.Errorf("name %q: want 1 to 40 characters of [a-z0-9-]", c.Name))
	}
	if c.Nodes < 0 || c.Nodes > 250 {
		errs = append(errs, fmt.Errorf("nodes %d: want 1 to 250", c.Nodes))
	}
	if c.Subnet != "" {
		if ip := net.ParseIP(c.Subnet + ".1").To4(); ip == nil || strings.Count(c.Subnet, ".") != 2 {
			errs = append(errs, fmt.Errorf("subnet %q: want three octets, such as 10.201.0", c.Subnet))
		}
	}
	if c.CommandTimeout < 0 {
		errs = append(errs, errors.New("command timeout must not be negative"))
	}
	return errors.Join(errs...)
}

// Network is network namespaces of a test: one per node, each with one
// interface (eth0) on a bridge that lives in a hub namespace of its own.
// Nothing of it is in the host's namespace but the namespaces' names
// (/run/netns), so the host's interfaces, routes and firewall never
// change. Processes run in a node's namespace with Command; the test
// process reaches them with Dial, which connects from inside the node's
// namespace (over its loopback, so even an isolated node answers), and
// offers services to them with ListenHub. Isolate takes a node's link to
// the bridge down, which drops all its traffic (TCP, UDP) to and from
// every other namespace; Heal brings it up. Cut drops the traffic
// between two nodes alone; Mend lets it through again. Its methods may
// be called from any goroutine; Isolate, Heal, Cut, Mend and Close run
// ip commands.
type Network struct {
	cfg   NetworkConfig
	hub   string
	nodes []string
}

// NewNetwork creates the namespaces, the bridge and the links. On an
// error it removes what it created. Close removes everything.
func NewNetwork(cfg NetworkConfig) (*Network, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("faults: network: %w", err)
	}
	cfg = cfg.withDefaults()
	n := &Network{cfg: cfg, hub: cfg.Name + "-hub"}
	for i := range cfg.Nodes {
		n.nodes = append(n.nodes, fmt.Sprintf("%s-%d", cfg.Name, i))
	}
	if err := n.create(); err != nil {
		return nil, errors.Join(fmt.Errorf("faults: network %s: %w", cfg.Name, err), n.Close())
	}
	return n, nil
}

func (n *Network) create() error {
	cmds := [][]string{
		{"netns", "add", n.hub},
		{"-n", n.hub, "link", "set", "lo", "up"},
		{"-n", n.hub, "link", "add", "br0", "type", "bridge"},
		{"-n", n.hub, "addr", "add", n.HubIP() + "/24", "dev", "br0"},
		{"-n", n.hub, "link", "set", "br0", "up"},
	}
	for i, ns := range n.nodes {
		cmds = append(cmds,
			[]string{"netns", "add", ns},
			[]string{"-n", ns, "link", "set", "lo", "up"},
			[]string{"-n", n.hub, "link", "add", n.port(i), "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"-n", n.hub, "link", "set", n.port(i), "master", "br0", "up"},
			[]string{"-n", ns, "addr", "add", n.NodeIP(i) + "/24", "dev", "eth0"},
			[]string{"-n", ns, "link", "set", "eth0", "up"},
		)
	}
	for _, args := range cmds {
		if err := n.ip(args...); err != nil {
			return err
		}
	}
	// The hub forwards nothing, so that what Cut routes through it is
	// dropped; a new namespace may inherit the host's forwarding.
	return inNamespace(n.hub, func() error {
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("0\n"), 0o644)
	})
}

// port is the bridge's end of node i's link, in the hub namespace.
func (n *Network) port(i int) string { return fmt.Sprintf("v%d", i) }

// ip runs the ip command with args.
func (n *Network) ip(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.CommandTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, n.cfg.IP, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", n.cfg.IP, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Nodes is how many node namespaces there are.
func (n *Network) Nodes() int { return len(n.nodes) }

// NodeIP is node i's address (subnet.i+1), on its eth0.
func (n *Network) NodeIP(i int) string { return fmt.Sprintf("%s.%d", n.cfg.Subnet, i+1) }

// HubIP is the bridge's address (subnet.254), where ListenHub's
// listeners are.
func (n *Network) HubIP() string { return n.cfg.Subnet + ".254" }

// Namespace is the name of node i's namespace, as ip netns knows it.
func (n *Network) Namespace(i int) string { return n.nodes[i] }

// Command returns the command line that runs bin with args in node i's
// namespace: ip netns exec, which execs bin in place, so the process
// started is bin itself and signals reach it.
func (n *Network) Command(i int, bin string, args ...string) (string, []string) {
	return n.cfg.IP, append([]string{"netns", "exec", n.nodes[i], bin}, args...)
}

// Isolate cuts node i off from every other namespace: its link to the
// bridge goes down, and packets either way are dropped.
func (n *Network) Isolate(i int) error {
	if err := n.ip("-n", n.hub, "link", "set", n.port(i), "down"); err != nil {
		return fmt.Errorf("faults: isolate node %d: %w", i, err)
	}
	return nil
}

// Heal undoes Isolate.
func (n *Network) Heal(i int) error {
	if err := n.ip("-n", n.hub, "link", "set", n.port(i), "up"); err != nil {
		return fmt.Errorf("faults: heal node %d: %w", i, err)
	}
	return nil
}

// Cut cuts the link between nodes i and j alone, both ways, while each
// still reaches every other node: a partial partition, across which
// gossip's indirect probes keep each alive in the other's view. Each
// routes the other's address through the hub, which forwards nothing:
// what either sends the other is dropped without a word, and TCP
// connections between them stay open, retransmitting into nothing, as
// on a dead path no reset or unreachable host ends. Mend undoes it.
func (n *Network) Cut(i, j int) error {
	if err := n.pair(i, j); err != nil {
		return fmt.Errorf("faults: cut %d-%d: %w", i, j, err)
	}
	for _, e := range [][2]int{{i, j}, {j, i}} {
		if err := n.ip("-n", n.nodes[e[0]], "route", "add", n.NodeIP(e[1])+"/32", "via", n.HubIP()); err != nil {
			return fmt.Errorf("faults: cut %d-%d: %w", i, j, err)
		}
	}
	return nil
}

// Mend undoes Cut of nodes i and j.
func (n *Network) Mend(i, j int) error {
	if err := n.pair(i, j); err != nil {
		return fmt.Errorf("faults: mend %d-%d: %w", i, j, err)
	}
	var errs []error
	for _, e := range [][2]int{{i, j}, {j, i}} {
		if err := n.ip("-n", n.nodes[e[0]], "route", "del", n.NodeIP(e[1])+"/32"); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("faults: mend %d-%d: %w", i, j, err)
	}
	return nil
}

// pair reports nodes i and j that are not two nodes of the network.
func (n *Network) pair(i, j int) error {
	if i < 0 || j < 0 || i >= len(n.nodes) || j >= len(n.nodes) || i == j {
		return fmt.Errorf("want two nodes of 0..%d", len(n.nodes)-1)
	}
	return nil
}

// Dial connects to addr from inside node i's namespace. Made for a
// node's own address: the connection then stays on that namespace's
// loopback and works while the node is isolated.
func (n *Network) Dial(ctx context.Context, i int, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := inNamespace(n.nodes[i], func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// ListenHub listens on addr (host:port, usually HubIP's) in the hub
// namespace, where every node reaches it unless isolated.
func (n *Network) ListenHub(network, addr string) (net.Listener, error) {
	var ln net.Listener
	err := inNamespace(n.hub, func() error {
		var err error
		ln, err = net.Listen(network, addr)
		return err
	})
	return ln, err
}

// Close deletes every namespace of the network, which destroys its
// links and bridge. Processes still running in a namespace keep it
// alive, cut off, until they end. It may be called more than once.
func (n *Network) Close() error {
	var errs []error
	for _, ns := range append([]string{n.hub}, n.nodes...) {
		if _, err := os.Stat("/run/netns/" + ns); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := n.ip("netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("faults: network %s: %w", n.cfg.Name, err)
	}
	return nil
}
