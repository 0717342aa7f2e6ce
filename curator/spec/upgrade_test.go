package spec

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	pb "github.com/curatorproject/curator/proto"
)

// TestUpgradeProvider: an upgrade points a group's provider at the
// release its kind runs, says whether that changes it, and skips (leaving
// it as it is) a group whose provider the release names nothing for.
func TestUpgradeProvider(t *testing.T) {
	process := func(bin string) *pb.GroupSpec {
		return &pb.GroupSpec{Provider: &pb.ProviderSpec{Kind: &pb.ProviderSpec_Process{Process: &pb.ProcessProviderSpec{Binary: bin}}}}
	}
	docker := func(img string) *pb.GroupSpec {
		return &pb.GroupSpec{Provider: &pb.ProviderSpec{Kind: &pb.ProviderSpec_Docker{Docker: &pb.DockerProviderSpec{Image: img}}}}
	}
	for _, tc := range []struct {
		name           string
		s              *pb.GroupSpec
		binary, image  string
		changed        bool
		skip, bin, img string
	}{
		{"process onto a new binary", process("/a"), "/b", "", true, "", "/b", ""},
		{"process on it already", process("/b"), "/b", "c:1", false, "", "/b", ""},
		{"process, an image only", process("/a"), "", "c:1", false, "its machines are processes: --binary names their release", "/a", ""},
		{"docker onto a new image", docker("c:1"), "/b", "c:2", true, "", "", "c:2"},
		{"docker, a binary only", docker("c:1"), "/b", "", false, "its machines are containers: --image names their release", "", "c:1"},
		{"no provider", &pb.GroupSpec{}, "/b", "c:2", false, "its spec names no provider", "", ""},
	} {
		changed, skip := UpgradeProvider(tc.s, tc.binary, tc.image)
		if changed != tc.changed || skip != tc.skip || tc.s.GetProvider().GetProcess().GetBinary() != tc.bin || tc.s.GetProvider().GetDocker().GetImage() != tc.img {
			t.Errorf("%s: changed %v, skip %q, now %v; want %v, %q, binary %q image %q", tc.name, changed, skip, tc.s.GetProvider(), tc.changed, tc.skip, tc.bin, tc.img)
		}
	}
}

// TestUpgradePlugin: an upgrade sets a plugin group's config key image
// (from --image) or binary (from --binary), whichever the config has,
// and skips, saying why, a plugin group whose config has neither or whose
// key the release does not name.
func TestUpgradePlugin(t *testing.T) {
	plugin := func(config map[string]string) *pb.GroupSpec {
		return &pb.GroupSpec{Provider: &pb.ProviderSpec{Kind: &pb.ProviderSpec_Plugin{Plugin: &pb.PluginProviderSpec{Path: "/p", Config: config}}}}
	}
	for _, tc := range []struct {
		name          string
		config        map[string]string
		binary, image string
		changed       bool
		skip          string
		want          map[string]string
	}{
		{"image onto a new one", map[string]string{"image": "c:1", "network": "n"}, "/b", "c:2", true, "", map[string]string{"image": "c:2", "network": "n"}},
		{"image on it already", map[string]string{"image": "c:2"}, "", "c:2", false, "", map[string]string{"image": "c:2"}},
		{"binary onto a new one", map[string]string{"binary": "/a"}, "/b", "c:2", true, "", map[string]string{"binary": "/b"}},
		{"image, a binary only", map[string]string{"image": "c:1"}, "/b", "", false, "its provider plugin's config names an image: --image names their release", map[string]string{"image": "c:1"}},
		{"binary, an image only", map[string]string{"binary": "/a"}, "", "c:2", false, "its provider plugin's config names a binary: --binary names their release", map[string]string{"binary": "/a"}},
		{"neither key", map[string]string{"provision": "/p"}, "/b", "c:2", false, "its machines are made by a provider plugin whose config has no image or binary key: an admin commits what they run", map[string]string{"provision": "/p"}},
		{"no config", nil, "/b", "c:2", false, "its machines are made by a provider plugin whose config has no image or binary key: an admin commits what they run", nil},
	} {
		s := plugin(tc.config)
		changed, skip := UpgradeProvider(s, tc.binary, tc.image)
		if changed != tc.changed || skip != tc.skip {
			t.Errorf("%s: changed %v, skip %q; want %v, %q", tc.name, changed, skip, tc.changed, tc.skip)
		}
		if diff := cmp.Diff(tc.want, s.GetProvider().GetPlugin().GetConfig()); diff != "" {
			t.Errorf("%s: config (-want +got):\n%s", tc.name, diff)
		}
	}
}

// TestConsensusFirst: the groups with the consensus role go first, each
// side in the order it was listed.
func TestConsensusFirst(t *testing.T) {
	g := func(name string, roles ...pb.Role) *pb.GroupSpec { return &pb.GroupSpec{Name: name, Roles: roles} }
	groups := []*pb.GroupSpec{g("a", pb.Role_ROLE_WORKER), g("b", pb.Role_ROLE_CONSENSUS, pb.Role_ROLE_WORKER), g("c", pb.Role_ROLE_WORKER), g("d", pb.Role_ROLE_CONSENSUS)}
	slices.SortStableFunc(groups, ConsensusFirst)
	var names []string
	for _, s := range groups {
		names = append(names, s.Name)
	}
	if want := []string{"b", "d", "a", "c"}; !slices.Equal(names, want) {
		t.Errorf("order %v, want %v", names, want)
	}
}

// TestProviderFromReleasePlugin: a rollback's template brings a plugin
// group's image or binary key back to what its release names, and
// leaves a config without those keys as it is.
func TestProviderFromReleasePlugin(t *testing.T) {
	for _, tc := range []struct {
		name    string
		config  map[string]string
		release *pb.MachineRelease
		want    map[string]string
	}{
		{"image", map[string]string{"image": "c:2", "network": "n"}, &pb.MachineRelease{Image: "c:1", Digest: "sha256:aa"}, map[string]string{"image": "c:1", "network": "n"}},
		{"binary", map[string]string{"binary": "/b"}, &pb.MachineRelease{Binary: "/a", Digest: "sha256:aa"}, map[string]string{"binary": "/a"}},
		{"neither key", map[string]string{"provision": "/p"}, &pb.MachineRelease{Image: "c:1"}, map[string]string{"provision": "/p"}},
		{"no release", map[string]string{"image": "c:2"}, nil, map[string]string{"image": "c:2"}},
	} {
		s := &pb.GroupSpec{Template: &pb.InstanceTemplate{Release: tc.release},
			Provider: &pb.ProviderSpec{Kind: &pb.ProviderSpec_Plugin{Plugin: &pb.PluginProviderSpec{Path: "/p", Config: tc.config}}}}
		ProviderFromRelease(s)
		if diff := cmp.Diff(tc.want, s.GetProvider().GetPlugin().GetConfig()); diff != "" {
			t.Errorf("%s: config (-want +got):\n%s", tc.name, diff)
		}
	}
}
