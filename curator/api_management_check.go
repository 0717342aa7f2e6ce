package curator

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

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
	case *pb.ListNodesRequest, *pb.ListEventsRequest, *pb.ClusterInfoRequest,
		*pb.ListGroupsRequest, *pb.WatchNodesRequest, *pb.BackupRequest:
		// Any page size, page token or limit is an answer (the server
		// caps what it sends).
	case *pb.GetNodeRequest:
		err = checkNodeQuery(r.Id)
	case *pb.NodeRequest:
		err = checkNodeQuery(r.Id)
	case *pb.RemoveNodeRequest:
		err = checkNodeQuery(r.Id)
	case *pb.UpdateNodeRequest:
		err = checkUpdateNode(r)
	case *pb.UpdateClusterRequest:
		if r.MaxVoters != nil {
			err = checkMaxVoters(*r.MaxVoters)
		}
		if err == nil && r.CertTtl != nil {
			if err = r.CertTtl.CheckValid(); err != nil {
				err = fmt.Errorf("%w: cert_ttl: %v", ErrInvalid, err)
			} else {
				err = CheckCertTTL(r.CertTtl.AsDuration())
			}
		}
	case *pb.RenewAdminCertificateRequest:
		if _, err = parsePublicKey(r.PublicKey); err != nil {
			err = fmt.Errorf("%w: %v", ErrInvalid, err)
		} else if r.Name != "" {
			if err = ValidateNodeName(r.Name); err != nil {
				err = fmt.Errorf("%w: admin name: %v", ErrInvalid, err)
			}
		}
	case *pb.GetTokenRequest:
		_, err = parseJoinRole(r.Role)
	case *pb.RotateTokenRequest:
		_, err = parseJoinRole(r.Role)
	case *pb.CommitGroupRequest:
		err = checkCommitGroup(r)
	case *pb.GetGroupRequest:
		err = checkGroupName(r.Name)
	case *pb.DestroyGroupRequest:
		err = checkGroupName(r.Name)
	case *pb.GetRolloutRequest:
		err = checkGroupName(r.Group)
	case *pb.ChangeRolloutRequest:
		err = checkChangeRollout(r)
	case *pb.WatchEventsRequest:
		if r.AfterRevision < 0 {
			err = fmt.Errorf("%w: after_revision %d is negative", ErrInvalid, r.AfterRevision)
		}
	default:
		err = fmt.Errorf("%w: %T: %w", ErrInvalid, req, errUnknownRequest)
	}
	return err
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
var rolloutActions = []string{"cancel", "pause", "resume"}

func checkChangeRollout(r *pb.ChangeRolloutRequest) error {
	if err := checkGroupName(r.Group); err != nil {
		return err
	}
	if !slices.Contains(rolloutActions, r.Action) {
		return fmt.Errorf("%w: rollout action %s: want cancel, pause or resume", ErrInvalid, QuoteShort(r.Action))
	}
	if r.TargetSha != "" && !configSHA.MatchString(r.TargetSha) {
		return fmt.Errorf("%w: target SHA %s: want a config SHA, 64 lowercase hex digits (or none, for the current target)", ErrInvalid, QuoteShort(r.TargetSha))
	}
	return nil
}
