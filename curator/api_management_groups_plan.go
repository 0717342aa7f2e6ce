package curator

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/curatorproject/curator/curator/spec"
	pb "github.com/curatorproject/curator/proto"
)

// A plan says what a commit would do before it is made (`group diff`,
// `group commit --dry-run`), as `kubectl diff` and `nomad job plan` do:
// what changes field by field (the audit trail's words, groupChangeList),
// whether the group rolls, and what it destroys. It makes the commit's
// own checks (prepareCommit, and the caller's role's), so a plan that
// passes is refused by the commit only if the group changes meanwhile;
// the group's revision in it is what catches that (checkRevision).

// PlanGroup is what CommitGroup of req would do, changing nothing.
func (m *managementAPI) PlanGroup(ctx context.Context, req *pb.CommitGroupRequest) (*pb.GroupPlan, error) {
	st, err := m.s.leaderFor()
	if err != nil {
		return nil, err
	}
	st.Groups.Mu.Lock()
	defer st.Groups.Mu.Unlock()
	gs, old, err := prepareCommit(ctx, st, req)
	if err != nil {
		return nil, err
	}
	var from *pb.GroupSpec
	if old != nil {
		from = proto.Clone(old.Spec).(*pb.GroupSpec)
		spec.NormalizeGroupSpec(from)
	}
	id := identityFrom(ctx)
	if err := spec.CheckGroupChange(id.opRole, id.name, from, gs); err != nil {
		return nil, err
	}
	plan := &pb.GroupPlan{Name: gs.Name, NewGroup: old == nil, ConfigSha: spec.GroupConfigSHA(gs.Template), Revision: old.GetSpecRevision()}
	if old == nil {
		plan.Changes = groupChangeList(nil, gs)
		return plan, nil
	}
	if !proto.Equal(old.Spec, gs) {
		plan.Changes = groupChangeList(from, gs)
	}
	live, err := observeGroup(ctx, st, old)
	if err != nil {
		return nil, err
	}
	plan.Machines = uint32(len(live.machines))
	plan.PreviousConfigSha = old.ConfigSha
	plan.Rolls = old.ConfigSha != plan.ConfigSha
	plan.Destroys = planDestroys(from, gs, plan.Machines)
	return plan, nil
}

// planDestroys says what a commit of spec to over spec from, a group of
// machines machines, takes away: the machines a smaller size destroys,
// and the machines a provider change leaves behind (the leader lists
// and destroys a group's machines through the provider its spec names:
// one of another kind, or a process provider keeping its books in
// another dir, does not see the machines the old one made).
func planDestroys(from, to *pb.GroupSpec, machines uint32) []string {
	var out []string
	if to.Size < from.Size && machines > to.Size {
		n := machines - to.Size
		out = append(out, fmt.Sprintf("%d of the group's %d machines: the size goes from %d to %d", n, machines, from.Size, to.Size))
	}
	fk, tk := providerKind(from.GetProvider()), providerKind(to.GetProvider())
	switch {
	case machines == 0:
	case fk != tk:
		out = append(out, fmt.Sprintf("the group's %d machines are left behind: the provider changes from %s to %s, which does not see them (destroy them first: scale the group to 0)", machines, fk, tk))
	case fk == "process" && from.GetProvider().GetProcess().GetDir() != to.GetProvider().GetProcess().GetDir():
		out = append(out, fmt.Sprintf("the group's %d machines are left behind: provider.process.dir changes, and the provider keeps its books there (destroy them first: scale the group to 0)", machines))
	case fk == "plugin" && !proto.Equal(from.GetProvider(), to.GetProvider()):
		out = append(out, fmt.Sprintf("the group's %d machines may be left behind: provider.plugin changes, and the plugin so configured may not see the machines the old one made (if so, destroy them first: scale the group to 0)", machines))
	}
	return out
}

// providerKind is the name of a provider spec's kind ("none": none).
func providerKind(p *pb.ProviderSpec) string {
	switch p.GetKind().(type) {
	case *pb.ProviderSpec_Process:
		return "process"
	case *pb.ProviderSpec_Docker:
		return "docker"
	case *pb.ProviderSpec_Plugin:
		return "plugin"
	}
	return "none"
}

// checkRevision refuses a commit over group old (nil: none) of a spec
// read at revision want (nil: no check) when the group's spec changed
// since: its revision is another.
func checkRevision(name string, old *pb.Group, want *uint64) error {
	if want == nil || *want == old.GetSpecRevision() {
		return nil
	}
	if old == nil {
		return fmt.Errorf("%w: group %s was read at revision %d, but no such group exists now (destroyed since?): "+
			"remove the revision: line to make it anew; nothing was committed", spec.ErrPrecondition, name, *want)
	}
	return fmt.Errorf("%w: group %s changed since this spec was read: it is at revision %d, the spec was read at %d: "+
		"`curator group diff FILE` shows what differs; describe it again and edit that, or commit with --force to overwrite it; nothing was committed",
		spec.ErrPrecondition, name, old.GetSpecRevision(), *want)
}
