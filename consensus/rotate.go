package consensus

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/curatorproject/curator/internal/atomicfile"
)

// Certificate rotation. etcd reads its certificate and key files again on
// every handshake, peer and client (go.etcd.io/etcd/client/pkg/transport,
// TLSInfo's GetCertificate and GetClientCertificate), so a renewed
// certificate takes effect by replacing the file: no restart, and the
// connections that are open keep going. The key stays the node's, so only
// the certificate file changes, and it is replaced by a rename, so etcd
// never reads half of it.

// tlsCfg is the configuration with the certificate last rotated in.
func (s *Service) tlsCfg() Config {
	s.tlsMu.Lock()
	defer s.tlsMu.Unlock()
	c := s.cfg
	if s.certPEM != nil {
		c.CertPEM = s.certPEM
	}
	return c
}

// loadTLS reads the current certificate and the CA, and makes the
// certificate the one this package's clients present.
func (s *Service) loadTLS() (tls.Certificate, *x509.Certificate, error) {
	cert, ca, err := s.tlsCfg().loadTLS()
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	s.tlsMu.Lock()
	defer s.tlsMu.Unlock()
	if s.clientCert.Load() == nil {
		s.clientCert.Store(&cert)
	}
	return cert, ca, nil
}

// RotateCert installs a renewed etcd certificate (PEM) for the node's key:
// the running etcd presents it from its next handshake, this package's
// clients from their next connection, and a later Run starts with it. A
// certificate that is not for the node's key or not from the etcd CA is
// refused, and nothing changes.
func (s *Service) RotateCert(certPEM []byte) error {
	s.tlsMu.Lock()
	defer s.tlsMu.Unlock()
	c := s.cfg
	if s.certPEM != nil {
		c.CertPEM = s.certPEM
	}
	c.CertPEM, c.CertFile = certPEM, ""
	pair, ca, err := c.loadTLS()
	if err != nil {
		return fmt.Errorf("rotate etcd certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return fmt.Errorf("rotate etcd certificate: %w", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return fmt.Errorf("rotate etcd certificate: not issued by the etcd CA: %w", err)
	}
	pair.Leaf = leaf
	path := s.cfg.CertFile
	if path == "" {
		path = filepath.Join(s.cfg.DataDir, "tls", "etcd.crt")
	}
	// Before the first Run there is no file yet: Run writes it from
	// certPEM.
	if _, err := os.Stat(filepath.Dir(path)); err == nil {
		if err := atomicfile.Write(path, certPEM, 0o644); err != nil {
			return fmt.Errorf("rotate etcd certificate: %w", err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("rotate etcd certificate: %w", err)
	}
	if s.cfg.CertFile == "" {
		s.certPEM = certPEM
	}
	s.clientCert.Store(&pair)
	return nil
}
