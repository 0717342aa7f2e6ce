// Package provider puts the machines behind nodes behind one small
// interface, so that the curator can create, destroy and find them without
// knowing what they are. Implementations: `process`, local processes;
// `docker`, containers; `plugin`, an executable of its own (the `exec`
// plugin runs an operator's scripts). This file is the contract they meet.
//
// Every machine carries labels: the cluster, the group and the config SHA
// it was made from, so that any leader can find the machines of a group
// and tell the ones that are due for a roll, with nothing kept in memory.
package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"
)

// The labels every provider sets on what it provisions.
const (
	LabelCluster   = "curator.cluster"
	LabelGroup     = "curator.group"
	LabelConfigSHA = "curator.config-sha"
)

// The placeholders a provider replaces in Spec.Args: the node's address
// (IP:PORT) and its data dir, as the new machine sees them, and the new
// instance's ID.
const (
	PlaceholderAddress    = "{{address}}"
	PlaceholderDataDir    = "{{data-dir}}"
	PlaceholderInstanceID = "{{instance-id}}"
)

// ExpandArgs returns args with the placeholders replaced by the instance's
// id, addr and dataDir.
func ExpandArgs(args []string, id, addr, dataDir string) []string {
	rep := strings.NewReplacer(PlaceholderAddress, addr, PlaceholderDataDir, dataDir, PlaceholderInstanceID, id)
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = rep.Replace(a)
	}
	return out
}

// Spec is what to provision: the labels to carry and how to start the node
// agent on the new machine.
type Spec struct {
	Labels map[string]string
	// Args are the `curator agent ...` arguments, with the placeholders
	// above; Env its environment (the join token goes there, not in Args).
	Args []string
	Env  map[string]string
	// Manager says the machine runs a curator, which as leader provisions
	// machines itself: a provider that needs access for that gives it
	// (the docker provider mounts the Docker socket).
	Manager bool
	// Domain is the failure domain to make the machine in, one of the
	// names the group gives (an engine, an address range, a zone); "" for
	// the provider's own choice.
	Domain string
}

// Instance is one machine a provider made.
type Instance struct {
	// ID is the provider's own name for it, stable for its life.
	ID     string
	Labels map[string]string
	// Address is the node's gRPC address, IP:PORT, once known.
	Address string
	// Created is when the provider made it: a machine whose node has not
	// joined some time after is destroyed.
	Created time.Time
	// Domain is the failure domain the machine is in, as the provider
	// knows it; "" when it names none.
	Domain string
}

// Provider makes, lists and destroys machines. Every method is safe to call
// again after a crash in the middle of it: Provision makes a new machine at
// each call (a spec names no machine: a group's machines have identical
// specs), and a machine it made, even if it never returned, is found by
// List by its labels, which the caller counts before it provisions;
// Destroy of a machine that is gone succeeds. providertest.Contract
// checks these rules.
type Provider interface {
	Provision(ctx context.Context, spec Spec) (Instance, error)
	Destroy(ctx context.Context, id string) error
	// List returns the machines whose labels include every one in
	// selector. A provider of several failure domains that could list
	// some of them only returns what it listed with an *UnreachableError
	// naming the others: never a short list as if it were whole.
	List(ctx context.Context, selector map[string]string) ([]Instance, error)
}

// Matches says whether labels include every label in selector: the rule
// List follows, in one place for every provider.
func Matches(labels, selector map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// LastWords is what a provider that keeps a dead machine's output until
// it is pruned can say of why the machine ended: the last line its agent
// wrote (an agent that exits writes its error last), or "" when there is
// nothing.
type LastWords interface {
	LastWords(ctx context.Context, id string) (string, error)
}

// LastLine returns the last non-blank line of out, cut to 400 bytes: an
// agent's last words as LastWords returns them.
func LastLine(out []byte) string {
	lines := strings.Split(strings.TrimRight(string(out), "\r\n\t "), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if len(last) > 400 {
		last = last[:400] + "…"
	}
	return last
}

// Runs is what a provider's machines run: the binary or the image it
// starts them from, and the digest of its content, so that a release is
// known by what it is rather than by its name ("sha256:<hex>").
type Runs struct {
	Binary string
	Image  string
	Digest string
}

// Runner is a provider that can say what the machines it would make now
// run: the leader records it in a group's template at each commit.
type Runner interface {
	Runs(ctx context.Context) (Runs, error)
}

// FileDigest is "sha256:<hex>" of the file at path's bytes.
func FileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// UnreachableError is what List (and a dead-machine listing) returns
// beside the machines it did list when some failure domains could not be
// listed: an engine that does not answer, a zone's API down. Those
// domains' machines are unknown, not gone: a caller must not take them
// for machines that went (the group loop holds them, see docs/groups.md).
// Domains maps each domain that could not be listed to why.
type UnreachableError struct {
	Domains map[string]error
}

func (e *UnreachableError) Error() string {
	names := slices.Sorted(maps.Keys(e.Domains))
	parts := make([]string, len(names))
	for i, d := range names {
		parts[i] = fmt.Sprintf("domain %s: %v", d, e.Domains[d])
	}
	return "could not list every failure domain: " + strings.Join(parts, "; ")
}

// Unwrap returns the domains' errors.
func (e *UnreachableError) Unwrap() []error {
	out := make([]error, 0, len(e.Domains))
	for _, d := range slices.Sorted(maps.Keys(e.Domains)) {
		out = append(out, e.Domains[d])
	}
	return out
}

// Unreachable returns the domains err says could not be listed (an
// *UnreachableError, wrapped or not), and whether it is one: a List
// error that is not leaves nothing known.
func Unreachable(err error) (map[string]error, bool) {
	var ue *UnreachableError
	if errors.As(err, &ue) {
		return ue.Domains, true
	}
	return nil, false
}
