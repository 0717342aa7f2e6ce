package leader

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/curatorproject/curator/curator/decide"
	"github.com/curatorproject/curator/provider"
	"github.com/curatorproject/curator/supervisor"
)

// What dead machines leave behind. A provider that keeps it (the process
// provider: a dead instance's dir, its data and its address; the docker
// provider: an exited container, its data included) deletes none of it by
// itself: a machine killed, crashed or powered off may come back
// with its data (`curator dev --dir` after a power loss restarts every
// instance that was not stopped). The group loop, which has the leader's
// registry, clears a dead machine's dir once no node record names its
// instance, and says so in an event (prune-machine).
//
// Why that is safe, the assumptions being that:
//   - the registry is loaded before any loop runs, and follows etcd's
//     watch, so a node record it lacks is one etcd lacks (or one written
//     a moment ago: a join that raced its machine's death, of a node with
//     nothing yet to keep);
//   - a node record goes only when the node is removed (by an operator,
//     the group loop's rule 1, the reaper), and a removed node cannot come
//     back: its certificate is refused and its etcd member is gone;
//   - a machine with no record ever never joined: its data dir holds no
//     cluster state worth a restart.
//
// So a dead machine with no node is one that cannot come back, and its dir
// goes; a dead machine whose node is still listed (down, or held by the
// repair ceiling) keeps its dir, and comes back if restarted. decide.Group
// is told of such machines (GroupSnapshot.Dead): it removes the node of
// one once it is down (rule 1, its dir cleared after), but as a repair,
// under the ceiling, which counts every dead machine: a group whose
// machines died together is held rather than emptied one by one.

// deadKeeper is a provider that keeps dead machines until told to clear
// them (the process and docker providers).
type deadKeeper interface {
	ListDead(ctx context.Context, selector map[string]string) ([]provider.Instance, error)
	ClearDead(ctx context.Context, id string) error
}

// pruner is a provider that keeps what crashed provisions leave behind
// until told to clear it.
type pruner interface {
	Prune(ctx context.Context) ([]string, error)
}

// groupMachines is instances as the group's machines.
func groupMachines(instances []provider.Instance) []decide.GroupMachine {
	var out []decide.GroupMachine
	for _, m := range instances {
		out = append(out, decide.GroupMachine{ID: m.ID, Created: m.Created, ConfigSHA: m.Labels[provider.LabelConfigSHA], Domain: m.Domain})
	}
	return out
}

// withoutNode returns the machines whose instance no node of nodes names.
func withoutNode(machines []decide.GroupMachine, nodes []decide.GroupNode) []decide.GroupMachine {
	return namedBy(machines, nodes, false)
}

// withNode returns the machines whose instance a node of nodes names.
func withNode(machines []decide.GroupMachine, nodes []decide.GroupNode) []decide.GroupMachine {
	return namedBy(machines, nodes, true)
}

// namedBy returns the machines whose instance a node of nodes names (or,
// with named false, that none names).
func namedBy(machines []decide.GroupMachine, nodes []decide.GroupNode, named bool) []decide.GroupMachine {
	names := map[string]bool{}
	for _, n := range nodes {
		names[n.InstanceID] = true
	}
	var out []decide.GroupMachine
	for _, m := range machines {
		if names[m.ID] == named {
			out = append(out, m)
		}
	}
	return out
}

// clearDead clears the dirs of the dead machines gone of group name,
// which no node names (see above), each with an event. A machine that
// cannot be cleared is logged and left for the next tick.
func (l *groupLoop) clearDead(ctx context.Context, dk deadKeeper, name string, gone []decide.GroupMachine) error {
	for _, m := range gone {
		if err := l.machines.clearDead(ctx, dk, m.ID); err != nil {
			var refused *providerRefusal
			if !errors.As(err, &refused) {
				return err // not the leader any more: clear nothing
			}
			supervisor.Logger(ctx).Warn("could not clear a dead machine", zap.String("group", name), zap.String("machine", m.ID), zap.Error(err))
			continue
		}
		l.notePruned(ctx, name, fmt.Sprintf("group %s: machine %s died and no node of the cluster names it (it never joined, or its node was removed): its dir is cleared", name, m.ID))
	}
	return nil
}

// prune has provider p clear what crashed provisions left, with an event
// for each machine it cleared.
func (l *groupLoop) prune(ctx context.Context, p provider.Provider, name string) {
	pr, ok := p.(pruner)
	if !ok {
		return
	}
	pruned, err := l.machines.prune(ctx, pr)
	if err != nil {
		supervisor.Logger(ctx).Warn("could not prune dead machines", zap.String("group", name), zap.Error(err))
	}
	for _, id := range pruned {
		l.notePruned(ctx, name, fmt.Sprintf("group %s: its provider cleared what machine %s left (a provision that did not finish)", name, id))
	}
}

// notePruned records that the loop cleared a machine: a log line, a
// metric and an event.
func (l *groupLoop) notePruned(ctx context.Context, group, reason string) {
	res := loopResult{action: "prune-machine", reason: reason, group: group}
	supervisor.Logger(ctx).Info(res.action, zap.String("reason", reason))
	l.metrics.Actions.WithLabelValues("groups", res.action).Inc()
	l.events.recordResult(ctx, "groups", res)
}
