// Package netfault fails the network between a test's processes the way
// networks fail, on this machine: it puts a process in a network namespace
// of its own, joined to the machine's by a veth pair, and then drops the
// link's packets silently (nftables: in one direction or both, for one
// peer's TCP port, for one connection, or a share of them at random). A dropped packet gets no reset, so the TCP ends wait as they do
// behind a dead switch.
//
// It needs root (network namespaces, nftables): New fails the test with
// that reason otherwise. Namespaces are named after the test process's pid;
// New first deletes those whose process is gone (a test binary killed before
// its clean-up), and each namespace is deleted at the test's end, which
// takes its veth pair and rules with it.
package netfault

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// prefix starts the name of every namespace this package makes.
const prefix = "rlmmnf-"

// Direction says which packets a rule drops, seen from inside the
// namespace.
type Direction int

const (
	Out  Direction = 1 << iota // the namespace's packets to the machine
	In                         // the machine's packets to the namespace
	Both = Out | In
)

func (d Direction) String() string {
	switch d {
	case Out:
		return "out"
	case In:
		return "in"
	case Both:
		return "both"
	}
	return "Direction(" + strconv.Itoa(int(d)) + ")"
}

// Namespace is a network namespace joined to the machine's by a veth pair:
// HostIP is the machine's end, NSIP the namespace's. A process in the
// namespace reaches a server of the machine at HostIP (the server must
// listen there, or on every address), and the machine reaches a server in
// the namespace at NSIP.
type Namespace struct {
	Name    string     // the name ip netns knows it by
	HostIP  netip.Addr // the machine's end of the veth pair
	NSIP    netip.Addr // the namespace's end
	hostDev string
	nsDev   string
	mu      sync.Mutex
	rules   []string // the nftables rules in force, for errors and logs
}

var seq atomic.Int32

// New makes a namespace for the test, deleted at its end.
func New(t testing.TB) *Namespace {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("netfault: network namespaces need root (euid %d): run the test as root, as CI does", os.Geteuid())
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("netfault: %s is not installed (make test-deps installs nftables; ip is iproute2's): %v", tool, err)
		}
	}
	if err := removeStale(); err != nil {
		t.Fatalf("netfault: %v", err)
	}
	n, err := create()
	if err != nil {
		t.Fatalf("netfault: %v", err)
	}
	t.Cleanup(func() {
		if err := n.remove(); err != nil {
			t.Errorf("netfault: %v", err)
		}
	})
	return n
}

func create() (*Namespace, error) {
	pid := os.Getpid()
	k := seq.Add(1)
	n := &Namespace{
		Name: fmt.Sprintf("%s%d-%d", prefix, pid, k),
		// Interface names hold at most 15 bytes.
		hostDev: fmt.Sprintf("nf%dh%d", pid%10_000_000, k%100),
		nsDev:   fmt.Sprintf("nf%dn%d", pid%10_000_000, k%100),
	}
	host, ns, err := freeSubnet(pid, int(k))
	if err != nil {
		return nil, err
	}
	n.HostIP, n.NSIP = host, ns
	steps := [][]string{
		{"ip", "netns", "add", n.Name},
		{"ip", "link", "add", n.hostDev, "type", "veth", "peer", "name", n.nsDev, "netns", n.Name},
		{"ip", "addr", "add", host.String() + "/30", "dev", n.hostDev},
		{"ip", "link", "set", n.hostDev, "up"},
		{"ip", "-n", n.Name, "addr", "add", ns.String() + "/30", "dev", n.nsDev},
		{"ip", "-n", n.Name, "link", "set", n.nsDev, "up"},
		{"ip", "-n", n.Name, "link", "set", "lo", "up"},
		{"ip", "netns", "exec", n.Name, "nft", "add table inet netfault; " +
			"add chain inet netfault out { type filter hook output priority 0; policy accept; }; " +
			"add chain inet netfault in { type filter hook input priority 0; policy accept; }"},
	}
	for _, s := range steps {
		if err := run(s...); err != nil {
			_ = n.remove()
			return nil, err
		}
	}
	return n, nil
}

// freeSubnet picks a /30 of 10.128.0.0/10 that no interface of the machine
// holds: the first of those from one derived from the pid and sequence.
func freeSubnet(pid, k int) (host, ns netip.Addr, err error) {
	ifaces, err := net.InterfaceAddrs()
	if err != nil {
		return host, ns, fmt.Errorf("list the machine's addresses: %w", err)
	}
	used := map[netip.Addr]bool{}
	for _, a := range ifaces {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			used[p.Masked().Addr()] = true
		}
	}
	const subnets = 1 << 20 // /30s in a /10
	start := (pid*64 + k) % subnets
	for i := range 4096 {
		j := (start + i) % subnets
		v := uint32(10)<<24 | uint32(128)<<16 | uint32(j)<<2
		base := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
		if !used[base] {
			return base.Next(), base.Next().Next(), nil
		}
	}
	return host, ns, errors.New("no free /30 in 10.128.0.0/10")
}

// removeStale deletes the namespaces of test processes that are gone.
func removeStale() error {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return fmt.Errorf("ip netns list: %w", err)
	}
	for line := range strings.Lines(string(out)) {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid == os.Getpid() || alive(pid) {
			continue
		}
		if err := run("ip", "netns", "del", name); err != nil {
			return fmt.Errorf("delete the stale namespace %s: %w", name, err)
		}
	}
	return nil
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// remove deletes the namespace; the kernel then deletes the veth pair.
func (n *Namespace) remove() error {
	if err := run("ip", "netns", "del", n.Name); err != nil {
		return err
	}
	// The machine's end goes with the namespace's; it is gone at once or
	// soon, and an error here only means it already is.
	_ = exec.Command("ip", "link", "del", n.hostDev).Run()
	return nil
}

// Command returns cmd run in the namespace (ip netns exec execs it: the
// process is cmd's own, and signals reach it).
func (n *Namespace) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// Dial connects from inside the namespace.
func (n *Namespace) Dial(network, address string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := n.inside(func() error {
		var err error
		c, err = net.DialTimeout(network, address, timeout)
		return err
	})
	return c, err
}

// Listen listens inside the namespace.
func (n *Namespace) Listen(network, address string) (net.Listener, error) {
	var l net.Listener
	err := n.inside(func() error {
		var err error
		l, err = net.Listen(network, address)
		return err
	})
	return l, err
}

// inside runs f on a thread that has entered the namespace. A socket
// belongs to the namespace it was made in, wherever it is used later.
func (n *Namespace) inside(f func() error) error {
	runtime.LockOSThread()
	own, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("the thread's network namespace: %w", err)
	}
	defer func() { _ = own.Close() }()
	target, err := os.Open("/run/netns/" + n.Name)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("namespace %s: %w", n.Name, err)
	}
	defer func() { _ = target.Close() }()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter namespace %s: %w", n.Name, err)
	}
	ferr := f()
	if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread stays locked, so that the runtime ends it with the
		// goroutine rather than reuse it in the wrong namespace.
		return fmt.Errorf("leave namespace %s: %w", n.Name, err)
	}
	runtime.UnlockOSThread()
	return ferr
}

// DropPort drops, silently, the TCP packets to (Out) or from (In) port of
// the machine: a server's port, such as PostgreSQL's.
func (n *Namespace) DropPort(d Direction, port int) error {
	var rules []string
	if d&Out != 0 {
		rules = append(rules, fmt.Sprintf("add rule inet netfault out ip daddr %s tcp dport %d drop", n.HostIP, port))
	}
	if d&In != 0 {
		rules = append(rules, fmt.Sprintf("add rule inet netfault in ip saddr %s tcp sport %d drop", n.HostIP, port))
	}
	return n.add(rules)
}

// DropPortExcept drops as DropPort does, but for the one connection whose
// end in the namespace has keepLocalPort.
func (n *Namespace) DropPortExcept(d Direction, port, keepLocalPort int) error {
	var rules []string
	if d&Out != 0 {
		rules = append(rules, fmt.Sprintf("add rule inet netfault out ip daddr %s tcp dport %d tcp sport != %d drop", n.HostIP, port, keepLocalPort))
	}
	if d&In != 0 {
		rules = append(rules, fmt.Sprintf("add rule inet netfault in ip saddr %s tcp sport %d tcp dport != %d drop", n.HostIP, port, keepLocalPort))
	}
	return n.add(rules)
}

// DropConn drops, silently, the packets of the one TCP connection whose
// end in the namespace has localPort: out, its packets from that port; in,
// those to it.
func (n *Namespace) DropConn(d Direction, localPort int) error {
	var rules []string
	if d&Out != 0 {
		rules = append(rules, fmt.Sprintf("add rule inet netfault out tcp sport %d drop", localPort))
	}
	if d&In != 0 {
		rules = append(rules, fmt.Sprintf("add rule inet netfault in tcp dport %d drop", localPort))
	}
	return n.add(rules)
}

func (n *Namespace) add(rules []string) error {
	if len(rules) == 0 {
		return errors.New("netfault: no direction to drop")
	}
	if err := run("ip", "netns", "exec", n.Name, "nft", strings.Join(rules, "; ")); err != nil {
		return err
	}
	n.mu.Lock()
	n.rules = append(n.rules, rules...)
	n.mu.Unlock()
	return nil
}

// Rules returns the drop rules in force.
func (n *Namespace) Rules() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.rules...)
}

// Heal removes every drop rule: the packets flow again, and TCP's
// retransmissions carry what waited.
func (n *Namespace) Heal() error {
	if err := run("ip", "netns", "exec", n.Name, "nft", "flush chain inet netfault out; flush chain inet netfault in"); err != nil {
		return err
	}
	n.mu.Lock()
	n.rules = nil
	n.mu.Unlock()
	return nil
}

// Lose drops, at random, percent of the link's packets (to 0.01 %), in
// direction d. (Delay needs tc's netem, which not every kernel has: this
// package does not depend on it.)
func (n *Namespace) Lose(d Direction, percent float64) error {
	bp := int(percent * 100) // in hundredths of a percent
	if bp < 1 || bp > 10000 {
		return fmt.Errorf("netfault: loss %v%%: want 0.01 to 100", percent)
	}
	var rules []string
	if d&Out != 0 {
		rules = append(rules, fmt.Sprintf("add rule inet netfault out oifname %s numgen random mod 10000 <= %d drop", n.nsDev, bp-1))
	}
	if d&In != 0 {
		rules = append(rules, fmt.Sprintf("add rule inet netfault in iifname %s numgen random mod 10000 <= %d drop", n.nsDev, bp-1))
	}
	return n.add(rules)
}

func run(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
