// Package faults holds curator's fault points: named places in the
// leader's changes where a test makes the process die (a binary built
// with -tags faults, the point named in CURATOR_FAULT) or holds a change
// in flight (a pause point, in every build).
package faults

import "sync/atomic"

// Env names the fault points a binary built with -tags faults dies
// at (comma-separated).
const Env = "CURATOR_FAULT"

// The named fault points (docs/architecture.md, "Fault points").
const (
	PromoteAfterMemberAdd   = "promote/after-member-add"
	DemoteAfterMemberRemove = "demote/after-member-remove"
	RolloutAfterDestroy     = "rollout/after-destroy"
	RolloutAfterProvision   = "rollout/after-provision"
	// RolloutSurgeLearner: the leader sees a consensus group's new
	// member, made by a rollout, as an etcd learner.
	RolloutSurgeLearner = "rollout/after-surge-learner"
	// RolloutAfterDemote: a rollout demoted an old manager.
	RolloutAfterDemote = "rollout/after-demote"
	// RolloutAfterRollBack: a failed rollout's record was turned
	// into its rollback, the group back on its previous template.
	RolloutAfterRollBack = "rollout/after-rollback"
	// SwarmAfterPromote: a node's Swarm worker was promoted to
	// manager, and nothing else of its promotion done yet.
	SwarmAfterPromote = "swarm/after-promote"
	// SwarmAfterDemote: a demoting node's Swarm manager was demoted
	// to worker, and its etcd member not yet removed.
	SwarmAfterDemote = "swarm/after-demote"
)

// ReadStale500ms is a read-side fault point: armed (Armed), the node
// reads of the management API (node ls, node inspect) are served from a
// view of the node records 500 ms old, a stale read that the history
// checker must catch (test/history). It does not make the process exit.
const ReadStale500ms = "read/stale-500ms"

// BeforeMemberRemove: a demotion or a removal passed the quorum
// guard and is about to take a member out of etcd (its leadership moved
// off first). A pause point (Pause): a test holds the change there,
// with muNodes held, to show that nothing else waits on it.
const BeforeMemberRemove = "membership/before-member-remove"

// paused, set by a test (SetPaused), is called at each pause point with
// its name, and may block there.
var paused atomic.Pointer[func(name string)]

// SetPaused has f called at each pause point with its name (nil: none).
// Only tests set it.
func SetPaused(f func(name string)) {
	if f == nil {
		paused.Store(nil)
		return
	}
	paused.Store(&f)
}

// Pause is a point at which a test can hold a change in flight; without
// one it does nothing, in every build.
func Pause(name string) {
	if f := paused.Load(); f != nil {
		(*f)(name)
	}
}
