package consensus

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// NewClient returns an etcd client of endpoints (client URLs) that presents
// cert and trusts only ca, the etcd CA. It connects lazily: a bad endpoint
// shows up on the first call, not here.
func NewClient(endpoints []string, cert tls.Certificate, ca *x509.Certificate) (*clientv3.Client, error) {
	return newClient(endpoints, func() *tls.Certificate { return &cert }, ca, nil)
}

// newClient is NewClient with the certificate read from cert at each
// handshake, so that a rotated certificate (RotateCert) is presented on
// the next connection and the open ones stay.
func newClient(endpoints []string, cert func() *tls.Certificate, ca *x509.Certificate, lg *zap.Logger) (*clientv3.Client, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("etcd client: no endpoints")
	}
	if ca == nil {
		return nil, errors.New("etcd client: no CA certificate")
	}
	if lg == nil {
		lg = zap.NewNop()
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	return clientv3.New(clientv3.Config{
		Endpoints: endpoints,
		TLS: &tls.Config{
			MinVersion: tls.VersionTLS13,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				return cert(), nil
			},
			RootCAs: roots,
		},
		// Notice a dead endpoint within seconds, so that calls move on to
		// the others.
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Logger: lg.Named("etcd-client").WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
			return levelCore{Core: c, level: zapcore.WarnLevel}
		})),
	})
}
