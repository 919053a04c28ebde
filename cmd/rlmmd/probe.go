package main

// probe.go: rlmmd --health-probe, the health check of a container image
// that has no shell: it asks the rlmmd at --listen for its grpc.health.v1
// status and exits 0 when it is SERVING.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// probe checks the health of the rlmmd that cfg describes and prints its
// status to out: 0 when SERVING, 1 otherwise.
func probe(cfg config, out io.Writer) int {
	status, err := probeHealth(cfg)
	if err != nil {
		fmt.Fprintln(out, "rlmmd --health-probe:", err)
		return 1
	}
	fmt.Fprintln(out, "rlmmd --health-probe:", cfg.listen, status)
	if status != healthpb.HealthCheckResponse_SERVING {
		return 1
	}
	return 0
}

func probeHealth(cfg config) (healthpb.HealthCheckResponse_ServingStatus, error) {
	target, err := probeTarget(cfg.listen)
	if err != nil {
		return 0, err
	}
	creds := insecure.NewCredentials()
	if cfg.tlsCert != "" {
		tc, err := probeTLS(cfg)
		if err != nil {
			return 0, err
		}
		creds = credentials.NewTLS(tc)
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", cfg.listen, err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.probeTimeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: serviceName})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", cfg.listen, err)
	}
	return resp.GetStatus(), nil
}

// probeTarget is the gRPC target of a --listen address; an unspecified
// host (0.0.0.0, [::], none) is reached on loopback.
func probeTarget(listen string) (string, error) {
	if path, ok := strings.CutPrefix(listen, "unix:"); ok {
		if path == "" {
			return "", errors.New("--listen unix: needs a path")
		}
		return "unix:" + path, nil
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("--listen %q: %w", listen, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return "passthrough:///" + net.JoinHostPort(host, port), nil
}

// probeTLS trusts exactly the certificate rlmmd serves (--tls-cert), whatever
// names it holds, since the probe dials the address rlmmd listens on, and
// presents --health-probe-cert when rlmmd asks for a client certificate.
func probeTLS(cfg config) (*tls.Config, error) {
	want, err := firstCertificate(cfg.tlsCert)
	if err != nil {
		return nil, err
	}
	tc := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Verification is the pin below (the peer must present exactly
		// --tls-cert), not a chain and a host name.
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 || !bytes.Equal(raw[0], want) {
				return errors.New("rlmmd presented another certificate than --tls-cert")
			}
			return nil
		},
	}
	if cfg.probeCert != "" {
		client, err := tls.LoadX509KeyPair(cfg.probeCert, cfg.probeKey)
		if err != nil {
			return nil, fmt.Errorf("--health-probe-cert %s / --health-probe-key %s: %w", cfg.probeCert, cfg.probeKey, err)
		}
		tc.Certificates = []tls.Certificate{client}
	}
	return tc, nil
}

// firstCertificate is the DER of the first certificate in a PEM file: the
// server's own, which the probe needs no key to pin.
func firstCertificate(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert: %w", err)
	}
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, fmt.Errorf("--tls-cert %s: no PEM certificate in it", path)
		}
		if block.Type == "CERTIFICATE" {
			return block.Bytes, nil
		}
	}
}
