package spec

import (
	"slices"

	"golang.org/x/mod/semver"
)

// CompareReleases orders two releases as nodes report them: by semver,
// and a release that is not semver (a bare "dev": a build that knew
// neither its release nor its commit) before any that is, since nothing
// can be said of what it holds. It returns -1, 0 or +1.
func CompareReleases(a, b string) int {
	va, vb := semver.IsValid(a), semver.IsValid(b)
	switch {
	case va && vb:
		return semver.Compare(a, b)
	case va:
		return 1
	case vb:
		return -1
	}
	return 0
}

// LowestRelease is the lowest of releases (CompareReleases), leaving out
// empty ones: "" when none is left.
func LowestRelease(releases []string) string {
	releases = slices.DeleteFunc(slices.Clone(releases), func(r string) bool { return r == "" })
	if len(releases) == 0 {
		return ""
	}
	return slices.MinFunc(releases, CompareReleases)
}
