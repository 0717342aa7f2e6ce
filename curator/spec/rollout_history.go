package spec

import (
	"strings"

	pb "github.com/curatorproject/curator/proto"
)

// MaxRolloutHistory bounds the configs a rollout record keeps.
const MaxRolloutHistory = 10

// SummaryOf is rollout r, to a config of template t, as history keeps it.
func SummaryOf(r *pb.Rollout, t *pb.InstanceTemplate) *pb.RolloutSummary {
	s := &pb.RolloutSummary{Sha: r.TargetSha, Template: t, State: r.State, Reason: r.Reason, Started: r.Started, Finished: r.Finished, RollbackOf: r.RollbackOf}
	if r.State == pb.RolloutState_ROLLOUT_STATE_ROLLING || r.State == pb.RolloutState_ROLLOUT_STATE_PAUSED {
		s.Reason = "replaced by a new config before it ended"
	}
	return s
}

// RolloutHistory is the history of a rollout that replaces group old's
// config: old's own (its rollout prev, or, with none, its first commit),
// then prev's history, at most MaxRolloutHistory.
func RolloutHistory(old *pb.Group, prev *pb.Rollout) []*pb.RolloutSummary {
	var h []*pb.RolloutSummary
	if prev != nil && prev.TargetSha == old.ConfigSha {
		h = append(h, SummaryOf(prev, old.Spec.GetTemplate()))
	} else {
		h = append(h, &pb.RolloutSummary{Sha: old.ConfigSha, Template: old.Spec.GetTemplate(), Started: old.Created, Reason: "the group's config before any rollout"})
	}
	if prev != nil {
		h = append(h, prev.History...)
	}
	return h[:min(len(h), MaxRolloutHistory)]
}

// RolloutWord is a rollout state as the CLI shows it: rolling, paused,
// done, cancelled, failed.
func RolloutWord(s pb.RolloutState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "ROLLOUT_STATE_"))
}
