package spec

import (
	"fmt"

	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// managementRoles is the operator role each management call needs
// (pki.OperatorRoles): authorize refuses a call that is not here, and
// TestManagementRolesCoverService fails for a call of the service
// definition that is missing, so a new call cannot be left out.
//
//   - reader: what only looks (lists, inspects, watches, events, the
//     cluster info, the audit trail): the dashboard on a wall.
//   - operator: what changes the fleet: drain, pause and active, promote
//     and demote, approve, remove, groups and rollouts.
//   - admin: what hands out a secret or changes the cluster itself:
//     tokens, certificates, cluster settings, backups.
//
// audited is every call that is not a reader's (what changes something, or
// reveals a secret), a certificate's renewal, and every refused call.
var managementRoles = map[string]string{
	"ListNodes":      pki.OperatorReader,
	"ListEvents":     pki.OperatorReader,
	"GetNode":        pki.OperatorReader,
	"GetClusterInfo": pki.OperatorReader,
	"ListGroups":     pki.OperatorReader,
	"GetGroup":       pki.OperatorReader,
	"GetRollout":     pki.OperatorReader,
	"WatchNodes":     pki.OperatorReader,
	"WatchEvents":    pki.OperatorReader,
	"ListAudit":      pki.OperatorReader,
	"GetUpgrade":     pki.OperatorReader,
	// An admin may ask for any certificate, any other role only for its
	// own, renewed (RenewAdminCertificate checks).
	"RenewAdminCertificate": pki.OperatorReader,

	"PromoteNode":   pki.OperatorOperator,
	"DemoteNode":    pki.OperatorOperator,
	"UpdateNode":    pki.OperatorOperator,
	"ApproveNode":   pki.OperatorOperator,
	"RemoveNode":    pki.OperatorOperator,
	"CommitGroup":   pki.OperatorOperator,
	"PlanGroup":     pki.OperatorOperator,
	"NodeLogs":      pki.OperatorOperator,
	"DestroyGroup":  pki.OperatorOperator,
	"SuspendGroup":  pki.OperatorOperator,
	"ChangeRollout": pki.OperatorOperator,
	"CancelUpgrade": pki.OperatorOperator,

	"UpdateCluster":          pki.OperatorAdmin,
	"GetToken":               pki.OperatorAdmin,
	"RotateToken":            pki.OperatorAdmin,
	"ListAdminCertificates":  pki.OperatorAdmin,
	"RevokeAdminCertificate": pki.OperatorAdmin,
	"Backup":                 pki.OperatorAdmin,
	"StartUpgrade":           pki.OperatorAdmin,
}

// ManagementRole is the operator role a management call (by its short
// name, "ListNodes") needs; "" for a call of no role.
func ManagementRole(call string) string {
	return managementRoles[call]
}

// audited says whether a call that was allowed goes into the audit trail.
func Audited(call string) bool {
	return managementRoles[call] != pki.OperatorReader || renewsItself[call]
}

// renewsItself are the calls a reader may make that change something: a
// certificate renewing itself.
var renewsItself = map[string]bool{"RenewAdminCertificate": true}

// revealing are the audited calls that change nothing: they hand out a
// secret or list the certificates, read a node's logs (which may say
// more than a reader sees), or say what a commit would do (a plan needs
// the commit's role). Every other audited call changes
// something and is also an event (loop "operator").
var revealing = map[string]bool{"GetToken": true, "Backup": true, "ListAdminCertificates": true, "PlanGroup": true, "NodeLogs": true}

// changes says whether a call changes something.
func Changes(call string) bool {
	return Audited(call) && !revealing[call]
}

// ManagementCalls are the short names of the Management service's calls,
// read from the service definition: what the role table must cover.
func ManagementCalls() []string {
	svc := pb.File_curator_proto.Services().ByName("Management")
	var out []string
	for i := range svc.Methods().Len() {
		out = append(out, string(svc.Methods().Get(i).Name()))
	}
	return out
}

// ManagementRequests are the request types of the management calls, in
// the order the service declares them, read from the proto itself: a call
// added later is checked (CheckManagementRequest must know it) and fuzzed
// without a change to the tests.
func ManagementRequests() []protoreflect.MessageType {
	svc := pb.File_curator_proto.Services().ByName("Management")
	var out []protoreflect.MessageType
	for i := range svc.Methods().Len() {
		mt, err := protoregistry.GlobalTypes.FindMessageByName(svc.Methods().Get(i).Input().FullName())
		if err != nil {
			panic(fmt.Sprintf("management call %s: %v", svc.Methods().Get(i).Name(), err))
		}
		out = append(out, mt)
	}
	return out
}
