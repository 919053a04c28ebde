package pgcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"maps"
	"math/big"
	"net"
	"path/filepath"
	"time"
)

// CA is a throwaway certificate authority for TLS tests: it issues server
// certificates that a client verifies with sslmode=verify-full and
// sslrootcert pointing at CertPEM.
type CA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

// NewCA makes a self-signed CA named name, valid for a day.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	return &CA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// CertPEM returns the CA's certificate, for a client's sslrootcert.
func (ca *CA) CertPEM() []byte { return ca.certPEM }

// Issue returns a server certificate signed by the CA for hosts (IP
// addresses or DNS names), and its private key, both PEM.
func (ca *CA) Issue(hosts ...string) (certPEM, keyPEM []byte, err error) {
	return ca.issue(x509.ExtKeyUsageServerAuth, hosts)
}

// IssueClient returns a client certificate signed by the CA with common
// name name, and its private key, both PEM: for mutual TLS.
func (ca *CA) IssueClient(name string) (certPEM, keyPEM []byte, err error) {
	return ca.issue(x509.ExtKeyUsageClientAuth, []string{name})
}

func (ca *CA) issue(usage x509.ExtKeyUsage, hosts []string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("pgcluster: server key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: hosts[0]},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("pgcluster: server certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("pgcluster: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// writeTLS writes the server certificate and key into the data directory
// (the key readable by the server user only, as PostgreSQL demands) and
// returns opts.ExtraConf with the settings that use them.
func (c *Cluster) writeTLS(opts Options) (map[string]string, error) {
	cert, key := filepath.Join(c.dataDir, "server.crt"), filepath.Join(c.dataDir, "server.key")
	if err := c.writeFile(cert, string(opts.TLSCert)); err != nil {
		return nil, err
	}
	if err := c.writeFile(key, string(opts.TLSKey)); err != nil {
		return nil, err
	}
	conf := map[string]string{"ssl": "on", "ssl_cert_file": cert, "ssl_key_file": key}
	maps.Copy(conf, opts.ExtraConf)
	return conf, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}
