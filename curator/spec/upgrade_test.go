package spec

import (
	"slices"
	"testing"

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
