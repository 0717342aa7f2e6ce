package spec

import (
	"fmt"
	"slices"
	"strings"

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

// The version policy: which releases may run side by side, judged by
// major and minor (patches and development builds of one minor mix
// freely):
//   - a manager runs within one minor of every other manager (same
//     major), so that an upgrade moves the managers one minor at a time;
//   - a worker runs no newer than the lowest manager, and at most one
//     minor older (the managers go first in an upgrade, the workers
//     after them).
//
// A release that is not semver (a build that knew neither its release nor
// its commit, "dev"; a test's) is not judged, on either side: nothing can
// be said of it.

// CheckReleaseSkew says whether a node of role (manager or worker) on
// release may run beside managers on the releases given (the others',
// its own left out): nil, or an ErrReleaseSkew that names both releases.
func CheckReleaseSkew(role JoinRole, release string, managers []string) error {
	if !semver.IsValid(release) {
		return nil
	}
	var known []string
	for _, m := range managers {
		if semver.IsValid(m) {
			known = append(known, m)
		}
	}
	if len(known) == 0 {
		return nil
	}
	lowest := slices.MinFunc(known, semver.Compare)
	highest := slices.MaxFunc(known, semver.Compare)
	mine, low, high := minorOf(release), minorOf(lowest), minorOf(highest)
	switch {
	case role == JoinManager && (mine.major != low.major || mine.major != high.major || mine.minor+1 < high.minor || low.minor+1 < mine.minor):
		return fmt.Errorf("%w: release %s may not run beside the managers' %s to %s: managers run within one minor of each other (see `curator version`; upgrade one minor at a time)",
			ErrReleaseSkew, release, lowest, highest)
	case role == JoinWorker && (mine.major != low.major || mine.minor > low.minor || mine.minor+1 < low.minor):
		return fmt.Errorf("%w: release %s may not run beside managers whose lowest release is %s: a worker runs no newer than the lowest manager and at most one minor older (upgrade the managers first)",
			ErrReleaseSkew, release, lowest)
	}
	return nil
}

// majorMinor is a release's major and minor numbers.
type majorMinor struct{ major, minor int }

// minorOf is the major and minor of a valid semver release.
func minorOf(release string) majorMinor {
	var mm majorMinor
	fmt.Sscanf(strings.TrimPrefix(semver.MajorMinor(release), "v"), "%d.%d", &mm.major, &mm.minor)
	return mm
}
