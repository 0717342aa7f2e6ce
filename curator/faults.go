package curator

import "sync/atomic"

// FaultEnv names the fault points a binary built with -tags faults dies
// at (comma-separated).
const FaultEnv = "CURATOR_FAULT"

// The named fault points (docs/architecture.md, "Fault points").
const (
	FaultPromoteAfterMemberAdd   = "promote/after-member-add"
	FaultDemoteAfterMemberRemove = "demote/after-member-remove"
	FaultRolloutAfterDestroy     = "rollout/after-destroy"
	FaultRolloutAfterProvision   = "rollout/after-provision"
	// FaultRolloutSurgeLearner: the leader sees a consensus group's new
	// member, made by a rollout, as an etcd learner.
	FaultRolloutSurgeLearner = "rollout/after-surge-learner"
	// FaultRolloutAfterDemote: a rollout demoted an old manager.
	FaultRolloutAfterDemote = "rollout/after-demote"
	// FaultRolloutAfterRollBack: a failed rollout's record was turned
	// into its rollback, the group back on its previous template.
	FaultRolloutAfterRollBack = "rollout/after-rollback"
	// FaultSwarmAfterPromote: a node's Swarm worker was promoted to
	// manager, and nothing else of its promotion done yet.
	FaultSwarmAfterPromote = "swarm/after-promote"
	// FaultSwarmAfterDemote: a demoting node's Swarm manager was demoted
	// to worker, and its etcd member not yet removed.
	FaultSwarmAfterDemote = "swarm/after-demote"
)

// FaultBeforeMemberRemove: a demotion or a removal passed the quorum
// guard and is about to take a member out of etcd (its leadership moved
// off first). A pause point (faultPause): a test holds the change there,
// with muNodes held, to show that nothing else waits on it.
const FaultBeforeMemberRemove = "membership/before-member-remove"

// faultPaused, set by a test of the package, is called at each pause
// point with its name, and may block there.
var faultPaused atomic.Pointer[func(name string)]

// faultPause is a point at which a test of the package can hold a change
// in flight; without one it does nothing, in every build.
func faultPause(name string) {
	if f := faultPaused.Load(); f != nil {
		(*f)(name)
	}
}
