package netfault

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/krabka/remotestorage/internal/testwait"
)

// echoServer listens on the namespace's machine end and echoes each line;
// it reports each line it received on got.
func echoServer(t *testing.T, n *Namespace) (port int, got <-chan string) {
	l, err := net.Listen("tcp", net.JoinHostPort(n.HostIP.String(), "0"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	lines := make(chan string, 100)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() })
			go func() {
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					lines <- line
					if _, err := io.WriteString(c, line); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port, lines
}

// roundTrip writes a line and reads its echo within d; the callers' lines
// differ from those before them.
func roundTrip(c net.Conn, r *bufio.Reader, line string, d time.Duration) error {
	if err := c.SetDeadline(time.Now().Add(d)); err != nil {
		return err
	}
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return err
	}
	// Echoes of earlier lines that timed out may come first.
	for {
		got, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if got == line+"\n" {
			return nil
		}
	}
}

type conn struct {
	net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, n *Namespace, port int) conn {
	c, err := n.Dial("tcp", net.JoinHostPort(n.HostIP.String(), strconv.Itoa(port)), 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return conn{c, bufio.NewReader(c)}
}

func (c conn) trip(line string, d time.Duration) error { return roundTrip(c.Conn, c.r, line, d) }

// healed waits until c's round trips work again (TCP retransmits what the
// drop held; its backoff decides when).
func healed(t *testing.T, c conn, what string) {
	testwait.Until(t, what, func() bool { return c.trip("again", 500*time.Millisecond) == nil })
}

func requireTimeout(t *testing.T, err error, what string) {
	t.Helper()
	var ne net.Error
	require.Error(t, err, what)
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "%s: want a timeout (a silent drop sends no reset), got %v", what, err)
}

func TestDropPortBothWays(t *testing.T) {
	t.Parallel()
	n := New(t)
	port, _ := echoServer(t, n)
	c := dial(t, n, port)
	require.NoError(t, c.trip("before", 5*time.Second))
	require.NoError(t, n.DropPort(Both, port))
	requireTimeout(t, c.trip("dropped", 300*time.Millisecond), "a round trip through the drop")
	_, err := n.Dial("tcp", net.JoinHostPort(n.HostIP.String(), strconv.Itoa(port)), 300*time.Millisecond)
	requireTimeout(t, err, "a new connection through the drop")
	require.NoError(t, n.Heal())
	c.r.Reset(c.Conn) // the timed-out read's partial state
	healed(t, c, "the connection after the heal")
}

func TestDropPortOneWay(t *testing.T) {
	t.Parallel()
	n := New(t)
	port, got := echoServer(t, n)
	c := dial(t, n, port)
	require.NoError(t, c.trip("before", 5*time.Second))
	<-got
	require.NoError(t, n.DropPort(In, port))
	requireTimeout(t, c.trip("asked", 2*time.Second), "a round trip whose reply is dropped")
	// The server heard the question: only its answer was dropped.
	select {
	case line := <-got:
		require.Equal(t, "asked\n", line)
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the server never received the line: the drop took the way out too")
	}
}

func TestDropConnOnlyThatOne(t *testing.T) {
	t.Parallel()
	n := New(t)
	port, _ := echoServer(t, n)
	cut, kept := dial(t, n, port), dial(t, n, port)
	require.NoError(t, n.DropConn(Both, cut.LocalAddr().(*net.TCPAddr).Port))
	requireTimeout(t, cut.trip("cut", 300*time.Millisecond), "the cut connection")
	require.NoError(t, kept.trip("kept", 5*time.Second), "the other connection to the same port")
	require.Len(t, n.Rules(), 2)
	require.NoError(t, n.Heal())
	require.Empty(t, n.Rules())

	healed(t, cut, "the cut connection after the heal")
	require.NoError(t, n.DropPortExcept(Both, port, kept.LocalAddr().(*net.TCPAddr).Port))
	requireTimeout(t, cut.trip("cut", 300*time.Millisecond), "a connection not excepted")
	require.NoError(t, kept.trip("kept", 5*time.Second), "the connection excepted")
}

func TestLose(t *testing.T) {
	t.Parallel()
	n := New(t)
	port, _ := echoServer(t, n)
	c := dial(t, n, port)
	require.Error(t, n.Lose(Both, 0), "no loss")
	require.Error(t, n.Lose(Both, 101), "more than all")
	require.NoError(t, n.Lose(Both, 100))
	requireTimeout(t, c.trip("lost", 300*time.Millisecond), "every packet lost")
	require.NoError(t, n.Heal())
	c.r.Reset(c.Conn)
	healed(t, c, "the connection after the heal")
	// At 30 %, about 51 % of round trips lose a packet of their two: some
	// time out at 100 ms (a retransmission takes 200 ms or more), some not.
	require.NoError(t, n.Lose(Both, 30))
	var lost, kept int
	for i := 0; (lost == 0 || kept == 0) && i < 500; i++ {
		c.r.Reset(c.Conn)
		if c.trip("maybe", 100*time.Millisecond) == nil {
			kept++
		} else {
			lost++
			require.NoError(t, n.Heal())
			c.r.Reset(c.Conn)
			healed(t, c, "the connection after a loss")
			require.NoError(t, n.Lose(Both, 30))
		}
	}
	require.Positive(t, lost, "round trips slowed by a lost packet")
	require.Positive(t, kept, "round trips that lost nothing")
}

func TestCommandRunsInside(t *testing.T) {
	t.Parallel()
	n := New(t)
	out, err := n.Command("ip", "-4", "-o", "addr", "show").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), n.NSIP.String())
	require.NotContains(t, string(out), n.HostIP.String()+"/")
}

// A namespace left by a test process that died is deleted by the next New.
func TestStaleNamespaceRemoved(t *testing.T) {
	// A pid that is surely gone: a child that has exited and been reaped.
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	dead := cmd.Process.Pid
	stale := fmt.Sprintf("%s%d-1", prefix, dead)
	require.NoError(t, run("ip", "netns", "add", stale))
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", stale).Run() })
	n := New(t)
	out, err := exec.Command("ip", "netns", "list").Output()
	require.NoError(t, err)
	require.NotContains(t, strings.Fields(string(out)), stale)
	// Its own are kept while it lives.
	_, err = os.Stat("/run/netns/" + n.Name)
	require.NoError(t, err)
}
