package curator

// The named fault points (docs/architecture.md, "Fault points").
const (
	FaultPromoteAfterMemberAdd   = "promote/after-member-add"
	FaultDemoteAfterMemberRemove = "demote/after-member-remove"
	FaultRolloutAfterDestroy     = "rollout/after-destroy"
	FaultRolloutAfterProvision   = "rollout/after-provision"
)
