package leader

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/provider"
)

// releaseProvider is the provider this test binary serves when a test
// starts it as a plugin: it makes nothing, and says its machines run
// config["image"], digest config["digest"], when its config has an
// image (else it does not say).
type releaseProvider struct{ runs provider.Runs }

type releaseRunner struct{ releaseProvider }

func (r *releaseRunner) Runs(context.Context) (provider.Runs, error) { return r.runs, nil }

func newReleaseProvider(config map[string]string) (provider.Provider, error) {
	p := releaseProvider{runs: provider.Runs{Image: config["image"], Digest: config["digest"]}}
	if config["image"] == "" {
		return &p, nil
	}
	return &releaseRunner{p}, nil
}

func (*releaseProvider) Provision(context.Context, provider.Spec) (provider.Instance, error) {
	return provider.Instance{}, errors.New("makes nothing")
}
func (*releaseProvider) Destroy(context.Context, string) error { return nil }
func (*releaseProvider) List(context.Context, map[string]string) ([]provider.Instance, error) {
	return nil, nil
}

// TestRecordReleasePlugin: a plugin group's template records what the
// plugin says its machines run (Runs), so that an upgrade of its image
// key (another image's digest), or the same image rebuilt (a new
// digest), is a new config SHA; a
// plugin that does not say records none; a plugin that does not start is
// refused.
func TestRecordReleasePlugin(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	group := func(config map[string]string) *pb.GroupSpec {
		return &pb.GroupSpec{Name: "g", Template: &pb.InstanceTemplate{Version: "1"},
			Provider: &pb.ProviderSpec{Kind: &pb.ProviderSpec_Plugin{Plugin: &pb.PluginProviderSpec{Path: self, Config: config}}}}
	}
	ctx := callCtx(t)
	record := func(gs *pb.GroupSpec) string {
		t.Helper()
		if err := RecordRelease(ctx, gs, nil, false, pki.OperatorAdmin); err != nil {
			t.Fatalf("RecordRelease: %v", err)
		}
		return spec.GroupConfigSHA(gs.Template)
	}

	gs := group(map[string]string{"image": "c:1", "digest": "sha256:aa"})
	sha1 := record(gs)
	if diff := cmp.Diff(&pb.MachineRelease{Image: "c:1", Digest: "sha256:aa"}, gs.Template.Release, protocmp.Transform()); diff != "" {
		t.Errorf("release (-want +got):\n%s", diff)
	}
	rebuilt := group(map[string]string{"image": "c:1", "digest": "sha256:bb"})
	if record(rebuilt) == sha1 {
		t.Error("the image rebuilt (a new digest) has the same config SHA")
	}
	upgraded := group(map[string]string{"image": "c:1", "digest": "sha256:aa"})
	if _, skip := spec.UpgradeProvider(upgraded, "", "c:2"); skip != "" {
		t.Fatal(skip)
	}
	upgraded.Provider.GetPlugin().Config["digest"] = "sha256:cc" // c:2's content
	if record(upgraded) == sha1 || upgraded.Template.Release.GetImage() != "c:2" {
		t.Errorf("upgraded to c:2: release %v, SHA unchanged %v", upgraded.Template.Release, spec.GroupConfigSHA(upgraded.Template) == sha1)
	}

	silent := group(map[string]string{"provision": "/p"})
	record(silent)
	if silent.Template.Release != nil {
		t.Errorf("a plugin that does not say what its machines run: release %v, want none", silent.Template.Release)
	}

	broken := group(nil)
	broken.Provider.GetPlugin().Path = "/bin/true"
	if err := RecordRelease(ctx, broken, nil, false, pki.OperatorAdmin); !errors.Is(err, spec.ErrInvalid) {
		t.Errorf("RecordRelease of a plugin that does not start: %v; want ErrInvalid", err)
	}
}
