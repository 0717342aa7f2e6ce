package spec

import (
	"slices"
	"testing"

	"github.com/curatorproject/curator/pki"
)

// TestManagementRolesCoverService: every call of the service definition
// has a role in the table, a known one, and the table names no call the
// service does not have. A new call fails here until it is given a role.
func TestManagementRolesCoverService(t *testing.T) {
	calls := ManagementCalls()
	for _, call := range calls {
		role, ok := managementRoles[call]
		if !ok {
			t.Errorf("management call %s has no operator role in managementRoles (curator/spec/roles.go): reads are reader, changes operator, secrets and the cluster itself admin", call)
			continue
		}
		if _, err := pki.ParseOperatorRole(role); err != nil {
			t.Errorf("management call %s: %v", call, err)
		}
	}
	for call := range revealing {
		if !Audited(call) {
			t.Errorf("revealing names %s, which is not audited", call)
		}
	}
	for call := range managementRoles {
		if !slices.Contains(calls, call) {
			t.Errorf("managementRoles names %s, which the Management service does not have", call)
		}
	}
}
