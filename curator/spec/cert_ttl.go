package spec

import (
	"fmt"
	"time"

	pb "github.com/curatorproject/curator/proto"
)

// Certificate lifetimes: the cluster setting cert_ttl is how long node,
// etcd and admin certificates are issued for (docs/architecture.md,
// "Certificates"). Agents renew theirs at about two thirds of it.
const (
	// DefaultCertTTL is cert_ttl when the cluster record sets none.
	DefaultCertTTL = 90 * 24 * time.Hour
	// MinCertTTL is the shortest cert_ttl: a renewal comes about every
	// two thirds of it, and must fit a round trip to the leader and a
	// few retries. It is this short for tests; production wants days.
	MinCertTTL = 10 * time.Second
	// MaxCertTTL is the longest: a certificate never outlives the CA
	// (10 years), and a stolen one should not live for ever.
	MaxCertTTL = 5 * 365 * 24 * time.Hour
)

// CheckCertTTL refuses a cert_ttl outside [MinCertTTL, MaxCertTTL].
func CheckCertTTL(d time.Duration) error {
	switch {
	case d < MinCertTTL:
		return fmt.Errorf("%w: cert TTL %s is shorter than the minimum, %s: nodes renew at two thirds of it, which must leave time to reach the leader (90 days, the default, suits production)", ErrInvalid, d, MinCertTTL)
	case d > MaxCertTTL:
		return fmt.Errorf("%w: cert TTL %s is longer than the maximum, %s (5 years): certificates are renewed automatically, so a long life buys nothing but a longer use of a stolen key", ErrInvalid, d, MaxCertTTL)
	}
	return nil
}

// certTTL is the cluster's cert_ttl, or the default.
func CertTTL(cs *pb.ClusterState) time.Duration {
	if d := cs.GetCertTtl(); d != nil && d.AsDuration() > 0 {
		return d.AsDuration()
	}
	return DefaultCertTTL
}

// AdminCertValidity is how long an admin certificate lasts unless the
// request says otherwise. A person renews it (`curator cluster
// admin-cert`), not an agent, so it does not follow cert_ttl, which may be
// minutes in a test cluster.
const AdminCertValidity = 365 * 24 * time.Hour

// The bounds of an admin certificate's requested validity (--ttl).
const (
	MinAdminCertTTL = time.Minute
	MaxAdminCertTTL = 5 * 365 * 24 * time.Hour
)
