package pki

import (
	"crypto/x509"
	"fmt"
	"slices"
)

// Operator roles: what an admin certificate (O=admin) may do with the
// management API, carried as the certificate's single organisational unit
// (OU), so that the certificate itself says it and no lookup can lose it.
// The roles are ordered: each may do what the ones before it may.
const (
	// OperatorReader may look: list, inspect, watch, events, cluster info.
	OperatorReader = "reader"
	// OperatorOperator may also change the fleet: drain, promote, approve,
	// remove, groups and rollouts.
	OperatorOperator = "operator"
	// OperatorAdmin may also handle secrets and the cluster itself:
	// tokens, certificates, cluster settings, backups.
	OperatorAdmin = "admin"
)

// OperatorRoles are the operator roles, least first.
var OperatorRoles = []string{OperatorReader, OperatorOperator, OperatorAdmin}

// ParseOperatorRole checks that s names an operator role.
func ParseOperatorRole(s string) (string, error) {
	if !slices.Contains(OperatorRoles, s) {
		return "", fmt.Errorf("operator role %q: want one of %q", quoteShort(s), OperatorRoles)
	}
	return s, nil
}

// OperatorRoleAllows says whether a certificate of role held may do what
// needs role need. An unknown role allows nothing.
func OperatorRoleAllows(held, need string) bool {
	h, n := slices.Index(OperatorRoles, held), slices.Index(OperatorRoles, need)
	return h >= 0 && n >= 0 && h >= n
}

// OperatorRole is the operator role of an admin certificate: its single
// OU, or OperatorAdmin for a certificate with none, as every admin
// certificate issued before roles existed has (they keep the power they
// were issued with).
func OperatorRole(cert *x509.Certificate) (string, error) {
	switch ous := cert.Subject.OrganizationalUnit; len(ous) {
	case 0:
		return OperatorAdmin, nil
	case 1:
		return ParseOperatorRole(ous[0])
	default:
		return "", fmt.Errorf("certificate of %q has %d organisational units, want at most one operator role", cert.Subject.CommonName, len(ous))
	}
}

// quoteShort cuts s to 40 bytes for an error message.
func quoteShort(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
