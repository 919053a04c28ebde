package pgtest

import (
	"context"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/krabka/remotestorage/internal/pgcluster"
)

// TLSServer is a throwaway cluster of one test with TLS on: a CA made for
// the test signed its certificate, for 127.0.0.1 and the name pg.remotestorage.test
// (which does not resolve), not for localhost.
type TLSServer struct {
	Cluster *pgcluster.Cluster
	// CAFile is the CA that signed the server's certificate; OtherCAFile a
	// CA that did not.
	CAFile, OtherCAFile string
}

// NewTLSServer starts a cluster (TCP, ssl=on) for this test alone, stopped
// at cleanup, with the remotestorage schema migrated into database
// "postgres" by the caller when it needs it.
func NewTLSServer(t testing.TB) TLSServer {
	t.Helper()
	dir := t.TempDir()
	ca, err := pgcluster.NewCA("remotestorage test CA")
	if err != nil {
		t.Fatal(err)
	}
	other, err := pgcluster.NewCA("some other CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := ca.Issue("127.0.0.1", "pg.remotestorage.test")
	if err != nil {
		t.Fatal(err)
	}
	s := TLSServer{CAFile: filepath.Join(dir, "ca.crt"), OtherCAFile: filepath.Join(dir, "other-ca.crt")}
	for name, b := range map[string][]byte{s.CAFile: ca.CertPEM(), s.OtherCAFile: other.CertPEM()} {
		if err := os.WriteFile(name, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgcluster.Start(ctx, pgcluster.Options{TCP: true, TLSCert: cert, TLSKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	s.Cluster = c
	return s
}

// DSN returns a DSN for database postgres at host (the server listens on
// 127.0.0.1; "localhost" reaches it under a name its certificate lacks),
// with sslmode=verify-full and sslrootcert=caFile.
func (s TLSServer) DSN(host, caFile string) string {
	_, port, _ := net.SplitHostPort(s.Cluster.TCPAddr())
	q := url.Values{}
	q.Set("sslmode", "verify-full")
	q.Set("sslrootcert", caFile)
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Host: net.JoinHostPort(host, port), Path: "/postgres", RawQuery: q.Encode()}
	return u.String()
}
