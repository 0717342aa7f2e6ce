package client

// What the client checks before it sends a change: the words and the
// key=value forms an operator types, and changes that cannot be right. The
// cluster is the authority and checks everything again; checking here means
// that a typo changes nothing and is reported without a round trip. Label
// rules are the server's own functions (spec.ValidateLabel), so the two
// cannot disagree.

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/curatorproject/curator/curator/spec"
	pb "github.com/curatorproject/curator/proto"
)

// ErrNothingToChange is returned for an update that gives no change.
var ErrNothingToChange = errors.New("nothing to change")

// CheckNodeID refuses an empty node ID, which as a prefix would match every
// node.
func CheckNodeID(id string) error {
	if strings.TrimSpace(id) == "" {
		return errors.New("node ID is empty: give a node ID, a unique prefix of one, or a node name")
	}
	return nil
}

// AvailabilityWords are the availabilities as the operator names them.
var AvailabilityWords = []string{"active", "pause", "drain"}

var availabilities = map[string]pb.Availability{
	"active": pb.Availability_AVAILABILITY_ACTIVE,
	"pause":  pb.Availability_AVAILABILITY_PAUSE,
	"drain":  pb.Availability_AVAILABILITY_DRAIN,
}

// ParseAvailability returns the availability a word names: one of
// AvailabilityWords, in lowercase.
func ParseAvailability(word string) (pb.Availability, error) {
	if a, ok := availabilities[word]; ok {
		return a, nil
	}
	return pb.Availability_AVAILABILITY_UNSPECIFIED, fmt.Errorf("availability %s is not one of %s", spec.QuoteShort(word), strings.Join(AvailabilityWords, ", "))
}

// ParseLabels parses labels given as key=value and checks them. A label
// given twice with one value counts once; with two values it is an error.
func ParseLabels(kvs []string) (map[string]string, error) {
	var labels map[string]string
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("label %s: give it as key=value", spec.QuoteShort(kv))
		}
		if err := spec.ValidateLabel(k, v); err != nil {
			return nil, err
		}
		if old, dup := labels[k]; dup && old != v {
			return nil, fmt.Errorf("label %q is given twice, as %q and %q: give it once", k, old, v)
		}
		if labels == nil {
			labels = map[string]string{}
		}
		labels[k] = v
	}
	return labels, nil
}

// ParseLabelKeys checks the keys of labels to remove and returns each once.
func ParseLabelKeys(keys []string) ([]string, error) {
	var out []string
	for _, k := range keys {
		if err := checkLabelKey(k); err != nil {
			return nil, err
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out, nil
}

func checkLabelKey(k string) error {
	switch {
	case k == "":
		return errors.New("the label key is empty")
	case strings.Contains(k, "="):
		return fmt.Errorf("label key %s: give only the key of the label to remove", spec.QuoteShort(k))
	}
	return spec.ValidateLabelKey(k)
}

// NodeUpdate is a change to one node's availability and labels.
type NodeUpdate struct {
	// Availability is the new availability; UNSPECIFIED leaves it as it
	// is.
	Availability pb.Availability
	// LabelAdd are labels to add or change.
	LabelAdd map[string]string
	// LabelRm are the keys of labels to remove.
	LabelRm []string
}

// Validate refuses an update the cluster would refuse, or one that changes
// nothing (ErrNothingToChange).
func (u NodeUpdate) Validate() error {
	switch u.Availability {
	case pb.Availability_AVAILABILITY_UNSPECIFIED, pb.Availability_AVAILABILITY_ACTIVE,
		pb.Availability_AVAILABILITY_PAUSE, pb.Availability_AVAILABILITY_DRAIN:
	default:
		return fmt.Errorf("availability %v is not one of %s", u.Availability, strings.Join(AvailabilityWords, ", "))
	}
	for _, k := range slices.Sorted(maps.Keys(u.LabelAdd)) {
		if err := spec.ValidateLabel(k, u.LabelAdd[k]); err != nil {
			return err
		}
	}
	for _, k := range u.LabelRm {
		if err := checkLabelKey(k); err != nil {
			return err
		}
		if _, both := u.LabelAdd[k]; both {
			return fmt.Errorf("label %q is both added and removed: give one", k)
		}
	}
	if u.Availability == pb.Availability_AVAILABILITY_UNSPECIFIED && len(u.LabelAdd) == 0 && len(u.LabelRm) == 0 {
		return ErrNothingToChange
	}
	return nil
}

// ClusterUpdate is a change to the cluster's settings; a nil field is left
// as it is.
type ClusterUpdate struct {
	RequireApproval *bool
	MaxVoters       *uint32
	// CertTTL is how long certificates issued from now on last.
	CertTTL *time.Duration
	// Swarm turns the Swarm flavor on or off.
	Swarm *bool
}

// Validate refuses an update that changes nothing (ErrNothingToChange). The
// limits of the settings are the cluster's to check.
func (u ClusterUpdate) Validate() error {
	if u.RequireApproval == nil && u.MaxVoters == nil && u.CertTTL == nil && u.Swarm == nil {
		return ErrNothingToChange
	}
	if u.CertTTL != nil {
		if err := spec.CheckCertTTL(*u.CertTTL); err != nil {
			return err
		}
	}
	return nil
}

// TokenRoles are the roles a join token is for, as the API names them.
var TokenRoles = []string{"worker", "manager"}

// CheckTokenRole refuses a role no join token is for.
func CheckTokenRole(role string) error {
	if !slices.Contains(TokenRoles, role) {
		return fmt.Errorf("token role %s is not one of %s", spec.QuoteShort(role), strings.Join(TokenRoles, ", "))
	}
	return nil
}

// checkToken refuses a token that cannot be a join token, so that what a
// script captures from `curator token show` is one word.
func checkToken(token string) error {
	if token == "" || strings.ContainsAny(token, " \t\r\n") {
		return errors.New("the cluster returned a malformed token")
	}
	return nil
}
