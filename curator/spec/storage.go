package spec

import (
	"fmt"

	"golang.org/x/mod/semver"
)

// StorageVersion is the layout of the records in etcd that this release
// writes and reads. A release that changes a layout an older release
// cannot read raises it, adds the layout to storageLayouts and the
// migration to the leader's (curator/storage.go): the leader migrates
// only once every manager runs a release that reads the new layout, and
// from then on an upgrade to an older release is refused.
const StorageVersion uint32 = 1

// StorageLayout is one storage version: what it is, and the first
// minor whose releases read it (development builds of a minor count as
// the minor, as in the version policy).
type StorageLayout struct {
	Version      uint32
	FirstRelease string
	What         string
}

// storageLayouts are every storage version, oldest first.
var storageLayouts = []StorageLayout{
	{Version: 1, FirstRelease: "v0.0", What: "the records of the first releases: nodes, groups (a template may record its release, which older releases keep without reading it), rollouts, events, the audit trail and the upgrade record"},
}

// StorageLayoutOf is storage version v (0 is 1: a cluster made before
// storage versions); ok is false for a version this release does not
// know (a newer one).
func StorageLayoutOf(v uint32) (StorageLayout, bool) {
	v = max(v, 1)
	for _, l := range storageLayouts {
		if l.Version == v {
			return l, true
		}
	}
	return StorageLayout{Version: v}, false
}

// StorageReadable says whether managers whose lowest release is lowest
// all read storage version v: a release that is not semver (a
// development build) is taken to read this release's.
func StorageReadable(v uint32, lowest string) bool {
	l, ok := StorageLayoutOf(v)
	if !ok {
		return false
	}
	return !semver.IsValid(lowest) || semver.Compare(semver.MajorMinor(lowest), l.FirstRelease) >= 0
}

// CheckStorageRead refuses an upgrade to release, which reads the
// records up to storage version reads, of a cluster whose records are at
// version at: its leader would not read what the cluster holds.
func CheckStorageRead(release string, reads, at uint32) error {
	reads, at = max(reads, 1), max(at, 1)
	if reads >= at {
		return nil
	}
	l, known := StorageLayoutOf(at)
	if !known {
		l.What, l.FirstRelease = "a layout of a release newer than this one", "the release that made it"
	}
	return fmt.Errorf("%w: release %s reads the cluster's records up to storage version %d, and the leader migrated them to version %d (%s) once every manager read it: "+
		"a release older than %s would not read them, so going back to it is refused",
		ErrPrecondition, QuoteShort(release), reads, at, l.What, l.FirstRelease)
}
