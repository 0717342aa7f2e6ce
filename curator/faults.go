package curator

import "github.com/curatorproject/curator/curator/internal/faults"

// The fault points (curator/internal/faults) that the end-to-end tests,
// outside the curator tree, start binaries dying or waiting at, and the
// skewed clock they start them with.
const (
	FaultEnv                   = faults.Env
	FaultDelayEnv              = faults.DelayEnv
	FaultDelayDirEnv           = faults.DelayDirEnv
	FaultClockSkewEnv          = faults.ClockSkewEnv
	FaultAPIBeforeReply        = faults.APIBeforeReply
	FaultWatchBeforeSend       = faults.WatchBeforeSend
	FaultRegistryBeforeApply   = faults.RegistryBeforeApply
	FaultPromoteAfterMemberAdd = faults.PromoteAfterMemberAdd
	FaultBeforeMemberRemove    = faults.BeforeMemberRemove
	FaultRolloutAfterProvision = faults.RolloutAfterProvision
	FaultRolloutSurgeLearner   = faults.RolloutSurgeLearner
	FaultRolloutAfterDemote    = faults.RolloutAfterDemote
	FaultRolloutAfterDestroy   = faults.RolloutAfterDestroy
	FaultRolloutAfterRollBack  = faults.RolloutAfterRollBack
	FaultReadStale500ms        = faults.ReadStale500ms
)
