package spec

import (
	"slices"
	"strings"

	pb "github.com/curatorproject/curator/proto"
)

// The rules of an upgrade (`curator upgrade`) that the leader's upgrade
// loop and the CLI (which drives an upgrade itself against a leader
// without the loop) both follow.

// UpgradeProvider points s's provider at the release: the process
// provider's binary, the Docker provider's image. changed says whether
// that is a change; skip, when the release names nothing for s's
// provider, says so (and s is left as it is).
func UpgradeProvider(s *pb.GroupSpec, binary, image string) (changed bool, skip string) {
	switch p := s.GetProvider().GetKind().(type) {
	case *pb.ProviderSpec_Process:
		if binary == "" {
			return false, "its machines are processes: --binary names their release"
		}
		changed, p.Process.Binary = p.Process.Binary != binary, binary
	case *pb.ProviderSpec_Docker:
		if image == "" {
			return false, "its machines are containers: --image names their release"
		}
		changed, p.Docker.Image = p.Docker.Image != image, image
	case *pb.ProviderSpec_Plugin:
		return false, "its machines are made by a provider plugin, whose config names what they run: an admin commits that"
	default:
		return false, "its spec names no provider"
	}
	return changed, ""
}

// ConsensusFirst orders groups as an upgrade takes them: those with the
// consensus role before the others (a stable sort keeps each side's
// order, by name as the groups are listed).
func ConsensusFirst(a, b *pb.GroupSpec) int {
	ca, cb := slices.Contains(a.GetRoles(), pb.Role_ROLE_CONSENSUS), slices.Contains(b.GetRoles(), pb.Role_ROLE_CONSENSUS)
	switch {
	case ca && !cb:
		return -1
	case cb && !ca:
		return 1
	}
	return 0
}

// ReleaseName names an upgrade's release: its binary, its image, or both.
func ReleaseName(binary, image string) string {
	var names []string
	for _, n := range []string{binary, image} {
		if n != "" {
			names = append(names, n)
		}
	}
	return strings.Join(names, " and ")
}
