package leader

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/provider"
	"github.com/curatorproject/curator/provider/plugin"
	"github.com/curatorproject/curator/provider/process"
)

// A group's template records what its machines run (template.release:
// the binary or image its provider names and that content's digest), so
// that the config SHA covers it: a new release, or a binary or image tag
// rebuilt in place, rolls the group, and a rollback or an undo brings the
// binary or image back with the rest of the template.

// RecordRelease sets gs's template.release from its provider as it is
// now on the leader's host (the binary's digest, the image's ID), over
// whatever the request carried: it is the leader's to say, never the
// spec's. A group committed before releases were recorded (old without
// one) keeps none while its provider names the same binary or image,
// unless force (an upgrade): its SHA stays as it was, and reading it
// rolls nothing.
//
// A plugin's release is what it answers to Runs (the docker plugin's
// image and its ID), none when it does not say (provider/plugin's
// ErrNoRelease); RecordRelease first checks that the plugin starts and
// takes its config.
//
// It reads only what an admin chose: a caller whose operator role
// (opRole) may not choose what machines run (an operator) and whose spec names another provider than
// the group's, or a new group, gets the group's release back untouched,
// and the commit is then refused for the provider it changed
// (spec.CheckGroupChange), before the leader has read or made anything
// the spec names.
func RecordRelease(ctx context.Context, gs *pb.GroupSpec, old *pb.Group, force bool, opRole string) error {
	gs.Template.Release = nil
	sameProvider := old != nil && proto.Equal(old.Spec.GetProvider(), gs.GetProvider())
	if !sameProvider && !pki.OperatorRoleAllows(opRole, pki.OperatorAdmin) {
		if r := old.GetSpec().GetTemplate().GetRelease(); r != nil {
			gs.Template.Release = proto.Clone(r).(*pb.MachineRelease)
		}
		return nil
	}
	if !force && sameProvider && old.Spec.GetTemplate().GetRelease() == nil {
		return nil
	}
	var runs provider.Runs
	var err error
	switch p := gs.GetProvider().GetKind().(type) {
	case *pb.ProviderSpec_Process:
		runs, err = process.BinaryRuns(p.Process.Binary)
	case *pb.ProviderSpec_Docker:
		runs, err = dockerRuns(ctx, p.Docker)
	case *pb.ProviderSpec_Plugin:
		// Whether the plugin runs here and takes its config, it says
		// now, not at the group's first machine.
		if err := checkPlugin(ctx, gs.GetName(), p.Plugin); err != nil {
			return err
		}
		runs, err = pluginRuns(ctx, p.Plugin)
		if errors.Is(err, plugin.ErrNoRelease) {
			return nil
		}
	default:
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: group %s: what its machines would run: %v", spec.ErrInvalid, gs.GetName(), err)
	}
	gs.Template.Release = spec.ReleaseOf(gs, runs.Image, runs.Digest)
	if gs.GetProvider().GetPlugin() != nil {
		gs.Template.Release.Binary = runs.Binary
	}
	return nil
}

// pluginRuns is what the plugin of spec p says its machines would run (a
// plugin process started for the question, stopped after).
func pluginRuns(ctx context.Context, p *pb.PluginProviderSpec) (provider.Runs, error) {
	cfg, err := plugin.ConfigFor(p.Path, p.Config)
	if err != nil {
		return provider.Runs{}, err
	}
	pp, err := plugin.New(cfg)
	if err != nil {
		return provider.Runs{}, err
	}
	defer pp.Close()
	return pp.Runs(ctx)
}

// checkPlugin starts the plugin of spec p, configures it and stops it.
func checkPlugin(ctx context.Context, group string, p *pb.PluginProviderSpec) error {
	cfg, err := plugin.ConfigFor(p.Path, p.Config)
	if err == nil {
		err = plugin.Check(ctx, cfg)
	}
	if err != nil {
		return fmt.Errorf("%w: group %s: provider.plugin: %v", spec.ErrInvalid, group, err)
	}
	return nil
}

// dockerRuns is the image a Docker provider of spec d would run and its
// ID on the daemon (a provider made for the question: it reaches the
// daemon, it makes nothing).
func dockerRuns(ctx context.Context, d *pb.DockerProviderSpec) (provider.Runs, error) {
	p, err := dockerProvider(d, nil)
	if err != nil {
		return provider.Runs{}, err
	}
	defer p.Close()
	return p.Runs(ctx)
}
