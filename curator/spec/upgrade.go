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
// provider's binary, the Docker provider's image, a plugin's config key
// image or binary (PluginImage, PluginBinary) when its config has that
// key. changed says whether that is a change; skip, when the release
// names nothing for s's provider, says so (and s is left as it is).
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
		return upgradePlugin(p.Plugin, binary, image)
	default:
		return false, "its spec names no provider"
	}
	return changed, ""
}

// The keys of a plugin's config that, by convention, name what its
// machines run: an upgrade sets the one the group's config has.
const (
	PluginImage  = "image"
	PluginBinary = "binary"
)

// upgradePlugin sets the plugin config's image to image, or its binary
// to binary, whichever key the config has (image first when it has
// both and the release names both).
func upgradePlugin(p *pb.PluginProviderSpec, binary, image string) (changed bool, skip string) {
	_, hasImage := p.GetConfig()[PluginImage]
	_, hasBinary := p.GetConfig()[PluginBinary]
	switch {
	case hasImage && image != "":
		changed, p.Config[PluginImage] = p.Config[PluginImage] != image, image
		return changed, ""
	case hasBinary && binary != "":
		changed, p.Config[PluginBinary] = p.Config[PluginBinary] != binary, binary
		return changed, ""
	case hasImage:
		return false, "its provider plugin's config names an image: --image names their release"
	case hasBinary:
		return false, "its provider plugin's config names a binary: --binary names their release"
	}
	return false, "its machines are made by a provider plugin whose config has no image or binary key: an admin commits what they run"
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
