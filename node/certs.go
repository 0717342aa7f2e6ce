package node

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/status"

	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

// Certificate renewal (docs/architecture.md, "Certificates"). The agent
// renews its node certificate, and its etcd certificate if it holds the
// consensus role, at about two thirds of the node certificate's life
// (pki.RenewAt, jittered earlier), through the node API with the
// certificate it has. The new certificate goes to disk first, then into
// the CertSource every TLS configuration of the agent and its curator
// reads at each handshake: connections that are open, and the streams on
// them, keep going with the certificate they were made with, and the next
// connection presents the new one. A renewal that fails is tried again
// (pki.RetryRenewAfter) until the certificate expires; one the cluster
// refuses (the node was removed) is not.

// renewTimeout bounds one renewal call.
const renewTimeout = 10 * time.Second

// errRenewRefused: the cluster refuses this node's renewal.
var errRenewRefused = errors.New("the cluster refuses to renew this node's certificate")

// runCertRenewal renews the node's certificates, for as long as it runs.
func (a *Agent) runCertRenewal(ctx context.Context) error {
	supervisor.Signal(ctx, supervisor.Healthy)
	lg := supervisor.Logger(ctx)
	for {
		cert := a.id.certs.Leaf()
		a.metrics.AgentCertExpiry.Set(float64(cert.NotAfter.Unix()))
		at := pki.RenewAt(cert, rand.Float64())
		lg.Debug("next certificate renewal", zap.Time("at", at), zap.Time("expires", cert.NotAfter))
		if err := supervisor.Sleep(ctx, time.Until(at)); err != nil {
			return err
		}
		for {
			err := a.renewCertificates(ctx)
			if err == nil {
				a.metrics.AgentCertRenewals.WithLabelValues("ok").Inc()
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, errRenewRefused) {
				a.metrics.AgentCertRenewals.WithLabelValues("refused").Inc()
				lg.Warn("certificate renewal refused: was this node removed (`curator node ls` tells)? To join again, stop this agent, wipe its data dir and run `curator agent join`",
					zap.Error(err), zap.Time("expires", cert.NotAfter))
				<-ctx.Done()
				return ctx.Err()
			}
			a.metrics.AgentCertRenewals.WithLabelValues("error").Inc()
			retry := pki.RetryRenewAfter(cert)
			lg.Warn("certificate renewal failed: trying again", zap.Error(err), zap.Duration("in", retry), zap.Time("expires", cert.NotAfter))
			if err := supervisor.Sleep(ctx, retry); err != nil {
				return err
			}
		}
	}
}

// renewCertificates asks the leader for new certificates and installs
// them: on disk, then in the running TLS configurations and etcd.
func (a *Agent) renewCertificates(ctx context.Context) error {
	lg := supervisor.Logger(ctx)
	ctx, cancel := context.WithTimeout(ctx, renewTimeout)
	defer cancel()
	resp, err := pb.NewCuratorClient(a.conn).RenewCertificate(ctx, &pb.RenewCertificateRequest{})
	switch {
	case err == nil:
	case isRefusal(err):
		return fmt.Errorf("%w: %s", errRenewRefused, status.Convert(err).Message())
	default:
		// Not a refusal of this node: also a manager demoted a moment
		// ago, which the leader takes no call from (tried again).
		return err
	}
	cert, err := pki.DecodeCert(resp.NodeCert)
	if err != nil {
		return fmt.Errorf("renewed node certificate: %w", err)
	}
	if err := a.checkRenewed(cert, pki.RoleNode, a.id.ca); err != nil {
		return err
	}
	if err := pki.WriteFiles(a.cfg.DataDir, nodeCertName, cert, nil); err != nil {
		return fmt.Errorf("save the renewed node certificate: %w", err)
	}
	a.id.certs.Set(pki.TLSCertificate(cert, a.id.key, a.id.ca))
	a.metrics.AgentCertExpiry.Set(float64(cert.NotAfter.Unix()))
	lg.Info("renewed the node certificate", zap.Time("expires", cert.NotAfter))
	if len(resp.EtcdCert) > 0 {
		if err := a.installEtcdCert(resp.EtcdCert); err != nil {
			return err
		}
		lg.Info("renewed the etcd certificate")
	}
	return nil
}

// checkRenewed refuses a certificate that is not this node's: another
// key or ID, another role, or not from ca.
func (a *Agent) checkRenewed(cert *x509.Certificate, role string, ca *x509.Certificate) error {
	id, gotRole, err := pki.Identity(cert)
	if err != nil {
		return err
	}
	pub, ok := a.id.key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if id != a.state.NodeID || gotRole != role || !ok || !pub.Equal(cert.PublicKey) {
		return fmt.Errorf("the renewed certificate is for %s %q, not for this node (%s): keeping the current one", gotRole, id, a.state.NodeID)
	}
	if err := pki.Verify(cert, ca); err != nil {
		return fmt.Errorf("the renewed certificate: %w", err)
	}
	return nil
}

// installEtcdCert keeps a renewed etcd certificate in consensus.json, for
// the next start of etcd, and gives it to the running etcd. A node whose
// consensus role went meanwhile keeps nothing.
func (a *Agent) installEtcdCert(certPEM []byte) error {
	a.muConsensusFile.Lock()
	defer a.muConsensusFile.Unlock()
	join, err := loadConsensus(a.cfg.DataDir)
	if err != nil || join == nil {
		return err
	}
	etcdCA, err := pki.DecodeCert(join.EtcdCa)
	if err != nil {
		return fmt.Errorf("etcd CA: %w", err)
	}
	cert, err := pki.DecodeCert(certPEM)
	if err != nil {
		return fmt.Errorf("renewed etcd certificate: %w", err)
	}
	if err := a.checkRenewed(cert, pki.RoleConsensus, etcdCA); err != nil {
		return err
	}
	if bytes.Equal(join.EtcdCert, certPEM) {
		return nil
	}
	join.EtcdCert = certPEM
	if err := saveConsensus(a.cfg.DataDir, join); err != nil {
		return fmt.Errorf("save the renewed etcd certificate: %w", err)
	}
	if svc, _ := a.consensus.get(); svc != nil {
		if err := svc.RotateCert(certPEM); err != nil {
			return err
		}
	}
	return nil
}
