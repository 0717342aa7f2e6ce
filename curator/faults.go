package curator

import "github.com/curatorproject/curator/curator/internal/faults"

// The fault points (curator/internal/faults) that the end-to-end tests,
// outside the curator tree, start binaries dying at.
const (
	FaultEnv                   = faults.Env
	FaultRolloutAfterProvision = faults.RolloutAfterProvision
	FaultRolloutSurgeLearner   = faults.RolloutSurgeLearner
	FaultRolloutAfterDemote    = faults.RolloutAfterDemote
	FaultRolloutAfterDestroy   = faults.RolloutAfterDestroy
	FaultRolloutAfterRollBack  = faults.RolloutAfterRollBack
	FaultReadStale500ms        = faults.ReadStale500ms
)
