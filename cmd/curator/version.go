package main

import (
	"cmp"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/curatorproject/curator/curator/spec"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// The release this binary is: what `curator version` prints, what its
// node reports (node ls, cluster info), and what a version policy will
// compare. A release build stamps it at link time (the Makefile's `make
// build VERSION=v1.2.3`):
//
//	go build -ldflags "-X main.version=v1.2.3 -X main.commit=$(git rev-parse HEAD)" ./cmd/curator
//
// An unstamped build takes it from the build information: the module's
// version when it was built from a tagged module (`go install
// …/cmd/curator@v1.2.3`), else nextRelease marked as a development build
// of the commit Go recorded from the checkout (v0.1.0-dev+2a25bf7af479,
// with .dirty when the tree had changes). Only a build that knows
// neither (-buildvcs=false, a source tarball) is a bare "dev".
var (
	version = ""
	commit  = ""
)

// nextRelease is the release this tree is heading for: a release bumps it
// in the same commit as its tag.
const nextRelease = "v0.1.0"

// buildRelease is what a binary knows of the release it is.
type buildRelease struct {
	Release string `json:"release"`
	// Commit is the full commit hash ("" when unknown).
	Commit string `json:"commit"`
	// Modified: the checkout it was built from had changes.
	Modified bool `json:"modified"`
	// CommitTime is the commit's time, RFC 3339 ("" when unknown).
	CommitTime string `json:"commit_time"`
	Go         string `json:"go"`
	Platform   string `json:"platform"`
	// StorageVersion is the layout of the records in etcd this release
	// reads and writes (spec.StorageVersion): an upgrade to it is refused
	// when the cluster's records are at a later one.
	StorageVersion uint32 `json:"storage_version"`
}

// currentRelease is this binary's release.
func currentRelease() buildRelease {
	bi, _ := debug.ReadBuildInfo()
	return releaseOf(version, commit, bi)
}

// binaryVersion is the release this binary's node reports.
func binaryVersion() string { return currentRelease().Release }

// releaseOf decides the release from the link-time stamps and the build
// information (nil when there is none): a pure function, for the tests.
func releaseOf(stamp, stampCommit string, bi *debug.BuildInfo) buildRelease {
	r := buildRelease{Commit: stampCommit, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, StorageVersion: spec.StorageVersion}
	mainVersion := ""
	if bi != nil {
		mainVersion = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if r.Commit == "" {
					r.Commit = s.Value
				}
			case "vcs.time":
				r.CommitTime = s.Value
			case "vcs.modified":
				r.Modified = s.Value == "true"
			}
		}
	}
	// A pseudo-version (v0.0.0-20261205074545-2a25bf7af479, what Go makes
	// of an untagged commit) names no release: the commit says more.
	tagged := semver.IsValid(mainVersion) && !module.IsPseudoVersion(mainVersion)
	switch {
	case stamp != "":
		r.Release = stamp
	case tagged:
		r.Release = strings.TrimSuffix(mainVersion, "+dirty")
	case r.Commit != "":
		r.Release = nextRelease + "-dev+" + r.Commit[:min(12, len(r.Commit))]
		if r.Modified {
			r.Release += ".dirty"
		}
	default:
		r.Release = "dev"
	}
	return r
}

func newVersionCommand() *cobra.Command {
	var format outputFormat
	c := &cobra.Command{
		Use:   "version",
		Short: "Print this binary's release and the commit it was built from",
		Long: `Print this binary's release (semver) and the commit it was built from.
A node reports its binary's release: node ls shows it per node, cluster info
the releases running and the lowest among the managers.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return writeRelease(cmd.OutOrStdout(), format, currentRelease())
		},
	}
	addOutputFlag(c, &format)
	return c
}

// writeRelease writes r as JSON or YAML, or as a short listing.
func writeRelease(w io.Writer, format outputFormat, r buildRelease) error {
	if format.structured() {
		return writeData(w, format, r)
	}
	commit := cmp.Or(r.Commit, "unknown (built without version control information)")
	if r.Modified {
		commit += " (with uncommitted changes)"
	}
	_, err := fmt.Fprintf(w, "curator %s\ncommit:      %s\ncommit time: %s\ngo:          %s %s\nstorage:     version %d\n",
		r.Release, commit, cmp.Or(r.CommitTime, "unknown"), r.Go, r.Platform, r.StorageVersion)
	return err
}
