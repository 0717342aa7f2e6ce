package spec

import (
	"fmt"
	"regexp"
	"strconv"
	"unicode/utf8"
)

// Names and labels are shown in tables, logs and error messages, and typed
// back by operators: they are DNS-label-like, so that no name can forge a
// table row (a newline), hide in a terminal (control characters) or drown
// a message (100 KB). The rules are checked by the server, which is the
// authority, and early by the CLI, with the same functions.

// MaxNameLength is the longest node name, label key or label value.
const MaxNameLength = 63

var (
	// nodeName: letters, digits, '-', '.', '_', starting and ending with a
	// letter or digit.
	nodeName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$`)
	// Labels are like Kubernetes': keys may also hold '/'; values may be
	// empty.
	labelKey   = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._/-]{0,61}[A-Za-z0-9])?$`)
	labelValue = regexp.MustCompile(`^([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?$`)
)

// ValidateNodeName checks a node name the operator chose. It does not know
// the other nodes: the leader also refuses a name equal to any node's ID
// (see Register). Its errors name the value, cut short (QuoteShort); the
// server wraps them in ErrInvalid.
func ValidateNodeName(name string) error {
	if !nodeName.MatchString(name) {
		return fmt.Errorf("node name %s: use 1 to %d letters, digits, '-', '.' or '_', starting and ending with a letter or digit", QuoteShort(name), MaxNameLength)
	}
	return nil
}

// ValidateGroupName checks a group's name: the rule of a node name, said of
// a group.
func ValidateGroupName(name string) error {
	if !nodeName.MatchString(name) {
		return fmt.Errorf("group name %s: use 1 to %d letters, digits, '-', '.' or '_', starting and ending with a letter or digit", QuoteShort(name), MaxNameLength)
	}
	return nil
}

// ValidateLabel checks a label key and value.
func ValidateLabel(key, value string) error {
	if err := ValidateLabelKey(key); err != nil {
		return err
	}
	if !labelValue.MatchString(value) {
		return fmt.Errorf("label %s=%s: a value is empty or up to %d letters, digits, '-', '_' or '.', starting and ending with a letter or digit", key, QuoteShort(value), MaxNameLength)
	}
	return nil
}

// ValidateLabelKey checks a label key.
func ValidateLabelKey(key string) error {
	if !labelKey.MatchString(key) {
		return fmt.Errorf("label key %s: use 1 to %d letters, digits, '-', '_', '.' or '/', starting and ending with a letter or digit", QuoteShort(key), MaxNameLength)
	}
	return nil
}

// envName is an environment variable's name as POSIX shells take it.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidateEnvName checks the name of an environment variable a group's
// machines get: a name with '=' would set another variable than the one
// given (the environment is KEY=VALUE), and an empty one none at all.
func ValidateEnvName(name string) error {
	if len(name) > maxEnvName || !envName.MatchString(name) {
		return fmt.Errorf("environment variable %s: use letters, digits and '_', not starting with a digit, up to %d", QuoteShort(name), maxEnvName)
	}
	return nil
}

// maxEnvName bounds an environment variable's name.
const maxEnvName = 255

// quoteLimit is how much of a value QuoteShort shows.
const quoteLimit = MaxNameLength + 1

// QuoteShort quotes s for a message, Go-style, cut after a little more than
// the longest valid name, with how long it was: an error about a bad value
// must never echo a huge one back.
func QuoteShort(s string) string {
	if len(s) <= quoteLimit {
		return strconv.Quote(s)
	}
	cut := quoteLimit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + fmt.Sprintf("... (%d bytes)", len(s))
}

// configSHA is the form of a group's config SHA: SHA-256 in hex.
var configSHA = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ValidateMachine checks what a node made by a group's provider says of
// itself when it joins: its group (a name), its machine's instance ID, the
// config SHA it was made from, and its labels. All may be empty.
func ValidateMachine(group, instanceID, sha string, labels map[string]string) error {
	if group != "" {
		if err := ValidateGroupName(group); err != nil {
			return err
		}
	}
	if instanceID != "" && !labelValue.MatchString(instanceID) {
		return fmt.Errorf("instance ID %s: use up to %d letters, digits, '-', '_' or '.'", QuoteShort(instanceID), MaxNameLength)
	}
	if sha != "" && !configSHA.MatchString(sha) {
		return fmt.Errorf("config SHA %s: want 64 lowercase hex digits", QuoteShort(sha))
	}
	if err := checkNodeLabelCount(len(labels)); err != nil {
		return err
	}
	for k, v := range labels {
		if err := ValidateLabel(k, v); err != nil {
			return err
		}
	}
	return nil
}
