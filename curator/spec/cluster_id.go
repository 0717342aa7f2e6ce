package spec

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
)

// NewClusterID returns a random cluster ID.
func NewClusterID() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// clusterIDForm is what NewClusterID makes: 16 lowercase hex digits.
var clusterIDForm = regexp.MustCompile(`^[0-9a-f]{16}$`)

// ValidateClusterID checks a cluster ID given by hand (`agent init
// --cluster-id`) against the form NewClusterID makes.
func ValidateClusterID(id string) error {
	if !clusterIDForm.MatchString(id) {
		return fmt.Errorf("cluster ID %s: want 16 lowercase hex digits, as `curator cluster info` shows them", QuoteShort(id))
	}
	return nil
}
