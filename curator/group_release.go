package curator

import (
	"context"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"

	"github.com/curatorproject/curator/curator/spec"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/provider"
)

// A group's template records what its machines run (template.release:
// the binary or image its provider names and that content's digest), so
// that the config SHA covers it: a new release, or a binary or image tag
// rebuilt in place, rolls the group, and a rollback or an undo brings the
// binary or image back with the rest of the template.

// recordRelease sets gs's template.release from its provider as it is
// now on the leader's host (the binary's digest, the image's ID), over
// whatever the request carried: it is the leader's to say, never the
// spec's. A group committed before releases were recorded (old without
// one) keeps none while its provider names the same binary or image,
// unless force (an upgrade): its SHA stays as it was, and reading it
// rolls nothing.
func (st *leaderState) recordRelease(ctx context.Context, gs *pb.GroupSpec, old *pb.Group, force bool) error {
	gs.Template.Release = nil
	if !force && old != nil && old.Spec.GetTemplate().GetRelease() == nil && proto.Equal(old.Spec.GetProvider(), gs.GetProvider()) {
		return nil
	}
	p, err := newProvider(gs.GetProvider(), st.cfg.Logger)
	if err != nil {
		return fmt.Errorf("%w: group %s: provider: %v", spec.ErrInvalid, gs.GetName(), err)
	}
	if c, ok := p.(io.Closer); ok {
		defer c.Close()
	}
	r, ok := p.(provider.Runner)
	if !ok {
		return nil
	}
	runs, err := r.Runs(ctx)
	if err != nil {
		return fmt.Errorf("%w: group %s: what its machines would run: %v", spec.ErrInvalid, gs.GetName(), err)
	}
	gs.Template.Release = spec.ReleaseOf(gs, runs.Image, runs.Digest)
	return nil
}
