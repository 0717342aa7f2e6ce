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
	advice := "restart the dev cluster (curator dev --dir " + dir + "); if its managers are gone for good, stop dev and run `curator dev --dir " + dir + " --force-new-cluster` (or restore a backup: `curator agent restore`)"
	return &rewordedError{msg: strings.Replace(err.Error(), curator.QuorumAdvice, advice, 1), err: err}
}

// rewordedError reads as msg and unwraps to err.
type rewordedError struct {
	msg string
	err error
}

func (e *rewordedError) Error() string { return e.msg }
func (e *rewordedError) Unwrap() error { return e.err }
