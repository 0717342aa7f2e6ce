package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/curatorproject/curator/client"
	"github.com/curatorproject/curator/curator"
)

// devQuorumAdvice rewrites the managers' advice about a lost quorum when the
// client config is a dev cluster's (DIR/config.yaml beside DIR/instances):
// there, `agent run --force-new-cluster` by hand fights dev for the
// instance, and `dev --force-new-cluster` is the command.
func devQuorumAdvice(configPath string, err error) error {
	if err == nil || !errors.Is(err, client.ErrQuorumLost) || !strings.Contains(err.Error(), curator.QuorumAdvice) {
		return err
	}
	dir := filepath.Dir(configPath)
	if filepath.Base(configPath) != "config.yaml" {
		return err
	}
	if fi, statErr := os.Stat(filepath.Join(dir, "instances")); statErr != nil || !fi.IsDir() {
		return err
	}
	return &rewordedError{msg: strings.Replace(err.Error(), curator.QuorumAdvice, curator.DevQuorumAdvice(dir), 1), err: err}
}

// devRestartQuorumAdvice rewrites the managers' advice about a lost quorum
// when the nodes dev restarted on dir do not make one (the other managers
// are gone, or do not come up): restarting dev again would not help, and
// `dev --force-new-cluster` is the command.
func devRestartQuorumAdvice(dir string, err error) error {
	if err == nil || !errors.Is(err, client.ErrQuorumLost) {
		return err
	}
	advice := "the managers not answering were not started above (their dirs are gone) or do not come up (see their logs); if they are gone for good, run `curator dev --dir " + dir + " --force-new-cluster`: it forces a new cluster on the one manager left, and the managers group makes new ones (or restore a backup: `curator agent restore`)"
	// The managers' advice, or the one a dev manager's /healthz gives.
	for _, given := range []string{curator.QuorumAdvice, curator.DevQuorumAdvice(dir)} {
		if strings.Contains(err.Error(), given) {
			return &rewordedError{msg: strings.Replace(err.Error(), given, advice, 1), err: err}
		}
	}
	return err
}

// rewordedError reads as msg and unwraps to err.
type rewordedError struct {
	msg string
	err error
}

func (e *rewordedError) Error() string { return e.msg }
func (e *rewordedError) Unwrap() error { return e.err }
