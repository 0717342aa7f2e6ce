package curator

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// The marker that stands for a secret in the requests of
// TestAuditEntryHoldsNoSecret.
const secretMarker = "S3CRET"

// TestAuthorizeRoles: each operator role against every management call of
// the service definition: allowed exactly when the role is at least the
// call's, and a refusal names the role needed and the one held.
func TestAuthorizeRoles(t *testing.T) {
	for _, held := range pki.OperatorRoles {
		id := identity{role: pki.RoleAdmin, opRole: held, name: "someone", serial: "5"}
		for _, call := range spec.ManagementCalls() {
			need := spec.ManagementRole(call)
			err := authorize(id, managementPrefix+call)
			want := slices.Index(pki.OperatorRoles, held) >= slices.Index(pki.OperatorRoles, need)
			if (err == nil) != want {
				t.Errorf("authorize(%s, %s) = %v; want allowed %v (needs %s)", held, call, err, want, need)
			}
			if err != nil {
				if !errors.Is(err, spec.ErrDenied) {
					t.Errorf("authorize(%s, %s) = %v, not ErrDenied", held, call, err)
				}
				for _, say := range []string{need, held, call} {
					if !strings.Contains(err.Error(), say) {
						t.Errorf("refusal %q does not say %q", err, say)
					}
				}
			}
		}
	}
	// An admin certificate of an unknown role may call nothing.
	if err := authorize(identity{role: pki.RoleAdmin, opRole: "root"}, managementPrefix+"ListNodes"); !errors.Is(err, spec.ErrDenied) {
		t.Errorf("an unknown role: %v, want ErrDenied", err)
	}
}

// fillSecrets sets every field of m: bytes and the strings of nested
// messages (a group spec's provider settings) to the marker, top-level
// scalars to plain values, nested names to "grp".
func fillSecrets(m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.ContainingOneof() != nil && m.WhichOneof(fd.ContainingOneof()) != nil {
			continue
		}
		switch {
		case fd.IsMap():
			if fd.MapKey().Kind() == protoreflect.StringKind && fd.MapValue().Kind() == protoreflect.StringKind {
				key := "k"
				if depth > 0 {
					key = secretMarker
				}
				m.Mutable(fd).Map().Set(protoreflect.ValueOfString(key).MapKey(), protoreflect.ValueOfString(secretMarker))
			}
		case fd.IsList():
			if fd.Kind() == protoreflect.BytesKind {
				m.Mutable(fd).List().Append(protoreflect.ValueOfBytes([]byte(secretMarker)))
			} else if fd.Kind() == protoreflect.MessageKind && depth < 3 {
				fillSecrets(m.Mutable(fd).List().AppendMutable().Message(), depth+1)
			} else if fd.Kind() == protoreflect.StringKind && depth > 0 {
				m.Mutable(fd).List().Append(protoreflect.ValueOfString(secretMarker))
			}
		case fd.Kind() == protoreflect.BytesKind:
			m.Set(fd, protoreflect.ValueOfBytes([]byte(secretMarker)))
		case fd.Kind() == protoreflect.MessageKind:
			if depth < 3 {
				fillSecrets(m.Mutable(fd).Message(), depth+1)
			}
		case fd.Kind() == protoreflect.StringKind:
			v := "x"
			switch {
			case depth > 0 && fd.Name() == "name":
				v = "grp"
			case depth > 0:
				v = secretMarker
			}
			m.Set(fd, protoreflect.ValueOfString(v))
		}
	}
}

// TestAuditEntryHoldsNoSecret: whatever a management request carries in
// bytes (keys, certificates) or nested messages (a group's provider
// settings), and whatever the error says, the audit entry of the call
// holds none of it; the call, its target and its outcome are there.
func TestAuditEntryHoldsNoSecret(t *testing.T) {
	id := identity{role: pki.RoleAdmin, opRole: pki.OperatorOperator, name: "alice", serial: "abc", peer: "10.0.0.1:5000"}
	for _, mt := range spec.ManagementRequests() {
		req := mt.New()
		fillSecrets(req, 0)
		call := strings.TrimSuffix(string(mt.Descriptor().Name()), "Request")
		e := auditEntry(id, call, req.Interface(), errors.New("boom"))
		text := fmt.Sprint(e)
		if strings.Contains(text, secretMarker) {
			t.Errorf("the audit entry of a %s shows a secret: %s", mt.Descriptor().Name(), text)
		}
		if e.Name != "alice" || e.Role != pki.OperatorOperator || e.Serial != "abc" || e.Peer != "10.0.0.1:5000" || e.Call != call || !strings.Contains(e.Outcome, "boom") {
			t.Errorf("the audit entry of a %s lacks who, where, what or the outcome: %s", mt.Descriptor().Name(), text)
		}
	}
	e := auditEntry(id, "DemoteNode", &pb.NodeRequest{Id: "node-7"}, nil)
	if e.Target != "node-7" || e.Args != "id=node-7" || e.Outcome != "ok" {
		t.Errorf("DemoteNode node-7: target %q args %q outcome %q", e.Target, e.Args, e.Outcome)
	}
	e = auditEntry(id, "CommitGroup", &pb.CommitGroupRequest{Spec: &pb.GroupSpec{Name: "web"}}, nil)
	if e.Target != "web" {
		t.Errorf("CommitGroup web: target %q", e.Target)
	}
	e = auditEntry(identity{peer: "1.2.3.4:1"}, "ListNodes", nil, errors.New("denied"))
	if e.Name != "anonymous" || e.Peer != "1.2.3.4:1" {
		t.Errorf("an anonymous refusal: %v", e)
	}
}

// TestBackupCarriesAuditAndCerts: a backup is every key under
// RecordPrefix (ReadBackup, the restore), so the audit trail and the
// issued certificates, with their revocations, go with it.
func TestBackupCarriesAuditAndCerts(t *testing.T) {
	for _, p := range []string{store.Keys.Audits(), store.Keys.AdminCerts()} {
		if !strings.HasPrefix(p, store.RecordPrefix) {
			t.Errorf("%s is not under %s: a backup would not carry it", p, store.RecordPrefix)
		}
	}
}
