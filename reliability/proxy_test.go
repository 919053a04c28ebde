package reliability_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// proxy is a TCP proxy on 127.0.0.1 in front of the database, which the test
// can take down: while down, it resets every connection it carries and every
// one it is offered, as a host that went away would (connection refused or
// reset). It counts the connections it is offered.
type proxy struct {
	ln                     net.Listener
	upstreamNet, upstreamA string

	offered atomic.Int64

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// startProxy starts a proxy to the server of dsn and returns it with a DSN
// that goes through it.
func startProxy(t *testing.T, dsn string) (*proxy, string) {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	require.NoError(t, err)
	p := &proxy{upstreamNet: "tcp", upstreamA: net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), conns: map[net.Conn]bool{}}
	if len(cfg.Host) > 0 && cfg.Host[0] == '/' {
		p.upstreamNet, p.upstreamA = "unix", cfg.Host+"/.s.PGSQL."+strconv.Itoa(int(cfg.Port))
	}
	p.ln, err = net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.wg.Go(p.accept)
	t.Cleanup(p.close)

	u := url.URL{Scheme: "postgres", User: url.User(cfg.User), Host: p.ln.Addr().String(), Path: "/" + cfg.Database, RawQuery: "sslmode=disable"}
	if cfg.Password != "" {
		u.User = url.UserPassword(cfg.User, cfg.Password)
	}
	return p, u.String()
}

func (p *proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.offered.Add(1)
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			reset(client)
			continue
		}
		p.conns[client] = true
		p.mu.Unlock()
		p.wg.Go(func() { p.serve(client) })
	}
}

func (p *proxy) serve(client net.Conn) {
	defer p.forget(client)
	upstream, err := (&net.Dialer{}).DialContext(context.Background(), p.upstreamNet, p.upstreamA)
	if err != nil {
		reset(client)
		return
	}
	p.mu.Lock()
	if p.down || !p.conns[client] {
		p.mu.Unlock()
		upstream.Close()
		reset(client)
		return
	}
	p.conns[upstream] = true
	p.mu.Unlock()
	defer p.forget(upstream)
	var both sync.WaitGroup
	both.Go(func() { _, _ = io.Copy(upstream, client); upstream.Close() })
	both.Go(func() { _, _ = io.Copy(client, upstream); client.Close() })
	both.Wait()
}

func (p *proxy) forget(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// reset closes c with a TCP RST rather than a FIN.
func reset(c net.Conn) {
	if tcp, ok := c.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	c.Close()
}

// setDown takes the proxy down (resetting what it carries) or back up.
func (p *proxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			reset(c)
			delete(p.conns, c)
		}
	}
}

func (p *proxy) close() {
	p.ln.Close()
	p.setDown(true)
	p.wg.Wait()
}
