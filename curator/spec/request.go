package spec

import (
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// What a management call may ask, checked before anything is read: the
// rules that need no state (a name is a name, a label is a label, an
// action is one of its words). What needs the cluster's state (does the
// node exist, would the quorum survive) is the handler's. The interceptor
// checks every unary management request on the manager that receives it,
// so a malformed one is refused without being forwarded, and the leader
// checks it again (it is the authority); a stream's handler checks its own
// request. Every refusal is ErrInvalid and quotes a bad value cut short.

// errUnknownRequest: CheckManagementRequest was given a request of no
// management call. Every call's request type has a case below; a new call
// without one is refused until it gets one.
var errUnknownRequest = errors.New("no check for this request type")

// CheckManagementRequest checks a management call's request as the leader
// will. The client checks what an operator types with the same rules
// (client/input.go) before it sends it.
func CheckManagementRequest(req proto.Message) error {
	var err error
	switch r := req.(type) {
	case *pb.ListEventsRequest:
		err = checkEventFilter(r.Filter)
	case *pb.ListNodesRequest, *pb.ClusterInfoRequest,
		*pb.ListGroupsRequest, *pb.WatchNodesRequest, *pb.BackupRequest,
		*pb.ListAdminCertificatesRequest:
		// Any page size, page token or limit is an answer (the server
		// caps what it sends).
	case *pb.GetNodeRequest:
		err = checkNodeQuery(r.Id)
	case *pb.NodeLogsRequest:
		err = checkNodeQuery(r.Id)
	case *pb.NodeRequest:
		err = checkNodeQuery(r.Id)
	case *pb.RemoveNodeRequest:
		err = checkNodeQuery(r.Id)
	case *pb.UpdateNodeRequest:
		err = checkUpdateNode(r)
	case *pb.UpdateClusterRequest:
		if r.MaxVoters != nil {
			err = CheckMaxVoters(*r.MaxVoters)
		}
		if err == nil && r.CertTtl != nil {
			if err = r.CertTtl.CheckValid(); err != nil {
				err = fmt.Errorf("%w: cert_ttl: %v", ErrInvalid, err)
			} else {
				err = CheckCertTTL(r.CertTtl.AsDuration())
			}
		}
	case *pb.RenewAdminCertificateRequest:
		err = checkRenewAdminCert(r)
	case *pb.RevokeAdminCertificateRequest:
		if strings.TrimSpace(r.Cert) == "" {
			err = fmt.Errorf("%w: a certificate serial or name is required", ErrInvalid)
		}
	case *pb.ListAuditRequest:
		if r.AfterRevision < 0 {
			err = fmt.Errorf("%w: after_revision %d is negative", ErrInvalid, r.AfterRevision)
		}
	case *pb.GetTokenRequest:
		_, err = ParseJoinRole(r.Role)
	case *pb.RotateTokenRequest:
		_, err = ParseJoinRole(r.Role)
	case *pb.CommitGroupRequest:
		err = checkCommitGroup(r)
	case *pb.GetUpgradeRequest, *pb.CancelUpgradeRequest:
	case *pb.StartUpgradeRequest:
		err = checkStartUpgrade(r)
	case *pb.GetGroupRequest:
		err = checkGroupName(r.Name)
	case *pb.DestroyGroupRequest:
		err = checkGroupName(r.Name)
	case *pb.SuspendGroupRequest:
		switch {
		case r.All && r.Name != "":
			err = fmt.Errorf("%w: name a group or ask for all of them, not both", ErrInvalid)
		case !r.All:
			err = checkGroupName(r.Name)
		}
	case *pb.GetRolloutRequest:
		err = checkGroupName(r.Group)
	case *pb.ChangeRolloutRequest:
		err = checkChangeRollout(r)
	case *pb.WatchEventsRequest:
		if r.AfterRevision < 0 {
			err = fmt.Errorf("%w: after_revision %d is negative", ErrInvalid, r.AfterRevision)
		} else {
			err = checkEventFilter(r.Filter)
		}
	default:
		err = fmt.Errorf("%w: %T: %w", ErrInvalid, req, errUnknownRequest)
	}
	return err
}

// checkRenewAdminCert checks a certificate request: a key, a name, a
// known operator role (or none: admin), a validity within bounds.
func checkRenewAdminCert(r *pb.RenewAdminCertificateRequest) error {
	if _, err := ParsePublicKey(r.PublicKey); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if r.Name != "" {
		if err := ValidateNodeName(r.Name); err != nil {
			return fmt.Errorf("%w: admin name: %v", ErrInvalid, err)
		}
	}
	if r.Role != "" {
		if _, err := pki.ParseOperatorRole(r.Role); err != nil {
			return fmt.Errorf("%w: role: %v", ErrInvalid, err)
		}
	}
	if r.Ttl != nil {
		if err := r.Ttl.CheckValid(); err != nil {
			return fmt.Errorf("%w: ttl: %v", ErrInvalid, err)
		}
		if d := r.Ttl.AsDuration(); d < MinAdminCertTTL || d > MaxAdminCertTTL {
			return fmt.Errorf("%w: ttl %v: want %v to %v", ErrInvalid, d, MinAdminCertTTL, MaxAdminCertTTL)
		}
	}
	return nil
}

// checkNodeQuery refuses an empty node ID, prefix or name, which as a
// prefix would match every node.
func checkNodeQuery(q string) error {
	if strings.TrimSpace(q) == "" {
		return fmt.Errorf("%w: a node ID, ID prefix or name is required", ErrInvalid)
	}
	return nil
}

func checkUpdateNode(r *pb.UpdateNodeRequest) error {
	if err := checkNodeQuery(r.Id); err != nil {
		return err
	}
	if _, ok := pb.Availability_name[int32(r.Availability)]; !ok {
		return fmt.Errorf("%w: unknown availability %d: want active, pause or drain", ErrInvalid, r.Availability)
	}
	if len(r.LabelAdd) > MaxNodeLabels {
		return fmt.Errorf("%w: label_add: %d labels, at most %d (MaxNodeLabels): a node carries no more", ErrInvalid, len(r.LabelAdd), MaxNodeLabels)
	}
	if len(r.LabelRm) > MaxLabelRemovals {
		return fmt.Errorf("%w: label_rm: %d keys, at most %d in one call (MaxLabelRemovals)", ErrInvalid, len(r.LabelRm), MaxLabelRemovals)
	}
	// In key order, so the same request is always refused for the same
	// label.
	for _, k := range slices.Sorted(maps.Keys(r.LabelAdd)) {
		if err := ValidateLabel(k, r.LabelAdd[k]); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	}
	for _, k := range r.LabelRm {
		if err := ValidateLabelKey(k); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		if _, both := r.LabelAdd[k]; both {
			return fmt.Errorf("%w: label %q is both added and removed", ErrInvalid, k)
		}
	}
	return nil
}

func checkCommitGroup(r *pb.CommitGroupRequest) error {
	if r.Spec == nil {
		return fmt.Errorf("%w: no group spec", ErrInvalid)
	}
	spec := proto.Clone(r.Spec).(*pb.GroupSpec)
	NormalizeGroupSpec(spec)
	if err := ValidateGroupSpec(spec); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

func checkGroupName(name string) error {
	if err := ValidateNodeName(name); err != nil {
		return fmt.Errorf("%w: group %v", ErrInvalid, err)
	}
	return nil
}

// rolloutActions are the changes ChangeRollout makes.
var rolloutActions = []string{"cancel", "pause", "resume", "restart", "undo"}

func checkChangeRollout(r *pb.ChangeRolloutRequest) error {
	if err := checkGroupName(r.Group); err != nil {
		return err
	}
	if !slices.Contains(rolloutActions, r.Action) {
		return fmt.Errorf("%w: rollout action %s: want cancel, pause, resume, restart or undo", ErrInvalid, QuoteShort(r.Action))
	}
	// A SHA may be a prefix: ChangeRollout resolves it among the group's
	// configs (resolveConfigSHA), refusing one unknown or ambiguous.
	for _, sha := range []struct{ name, v string }{{"target SHA", r.TargetSha}, {"to SHA", r.ToSha}} {
		if sha.v != "" && (len(sha.v) > 64 || strings.Trim(strings.ToLower(sha.v), "0123456789abcdef") != "") {
			return fmt.Errorf("%w: %s %s: want a config SHA or a prefix of one, hex digits (or none)", ErrInvalid, sha.name, QuoteShort(sha.v))
		}
	}
	if r.ToSha != "" && r.Action != "undo" {
		return fmt.Errorf("%w: to SHA is for undo only", ErrInvalid)
	}
	return nil
}

// ParsePublicKey reads a public key in PKIX DER, as requests carry it.
func ParsePublicKey(der []byte) (any, error) {
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	return pub, nil
}

// checkStartUpgrade: an upgrade names its release, a binary by its
// absolute path or an image, in text a spec would take.
func checkStartUpgrade(r *pb.StartUpgradeRequest) error {
	switch {
	case r.Binary == "" && r.Image == "":
		return fmt.Errorf("%w: name the release: --binary PATH (the process provider's groups) or --image REF (the Docker provider's)", ErrInvalid)
	case r.Binary != "" && !strings.HasPrefix(r.Binary, "/"):
		return fmt.Errorf("%w: --binary %s is not an absolute path", ErrInvalid, QuoteShort(r.Binary))
	}
	for field, v := range map[string]string{"binary": r.Binary, "image": r.Image} {
		if err := CheckText(field, v); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	}
	return nil
}
