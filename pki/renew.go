package pki

import (
	"crypto/x509"
	"time"
)

// Renewal. A certificate is renewed at about two thirds of its life, its
// life being what it says: NotBefore to NotAfter (a leaf is backdated by a
// tenth of its validity at most, so two thirds of that span is about 0.63
// of the validity after its issue). Jitter moves the moment earlier, by up
// to a fifteenth of the life (so between 0.6 and 2/3 of it), and never
// later: a fleet whose certificates were issued together (a new cluster, a
// changed cert_ttl) does not renew in one burst, and no node renews later
// than two thirds. What is left after two thirds (a third of the life) is
// the time to retry while the leader cannot be reached.

// RenewAt is when cert should be renewed, for a jitter in [0, 1) (a random
// number; 0 is exactly two thirds of the life).
func RenewAt(cert *x509.Certificate, jitter float64) time.Time {
	return renewAt(cert.NotBefore, cert.NotAfter, jitter)
}

func renewAt(notBefore, notAfter time.Time, jitter float64) time.Time {
	life := notAfter.Sub(notBefore)
	if life <= 0 {
		return notBefore
	}
	jitter = min(max(jitter, 0), 1)
	frac := 2.0/3 - jitter/15
	return notBefore.Add(time.Duration(float64(life) * frac))
}

// RetryRenewAfter is how long to wait before trying a renewal that failed
// again: a thirtieth of the certificate's life, between a second and a
// minute, so a certificate of seconds is retried several times before it
// expires and one of months does not hammer a leader that is away.
func RetryRenewAfter(cert *x509.Certificate) time.Duration {
	life := cert.NotAfter.Sub(cert.NotBefore)
	return min(max(life/30, time.Second), time.Minute)
}
