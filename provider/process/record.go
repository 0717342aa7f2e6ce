//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package process

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/curatorproject/curator/internal/atomicfile"
)

// record is what the provider knows of one instance: the file
// DIR/instances/<id>/instance.json. Only recordLoad, recordSave and
// recordIDs touch the layout.
type record struct {
	ID      string            `json:"id"`
	Labels  map[string]string `json:"labels"`
	Address string            `json:"address"`
	// PID is 0 while the process is being started: a record left with 0
	// is from a Provision that crashed, before the process started (there
	// is none) or after (adoptOrphans records it).
	PID int `json:"pid"`
	// StartTime is the process's start time in clock ticks since boot
	// (Linux /proc/<pid>/stat field 22), 0 where unknown: it tells the
	// process from a later one that got the same pid.
	StartTime uint64    `json:"start_time,omitempty"`
	Args      []string  `json:"args"`
	Started   time.Time `json:"started"`
	// Created is when Provision made the instance; Start does not change
	// it.
	Created time.Time `json:"created"`
	// Stopped is set by Stop and cleared by Start: the instance is down on
	// purpose and keeps its dir and its address (a node's certificate
	// names its address) until Start runs it again or Destroy removes it.
	// Prune leaves it alone.
	Stopped bool `json:"stopped,omitempty"`
}

const recordFile = "instance.json"

func (p *Provider) instancesDir() string { return filepath.Join(p.cfg.Dir, "instances") }

func (p *Provider) instanceDir(id string) string { return filepath.Join(p.instancesDir(), id) }

// DataDir is the data dir of instance id, {{data-dir}} in its args.
func (p *Provider) DataDir(id string) string { return filepath.Join(p.instanceDir(id), "data") }

// LogFile is where the output of instance id's process goes.
func (p *Provider) LogFile(id string) string { return filepath.Join(p.instanceDir(id), "agent.log") }

// validID rejects IDs that are not one plain path element, so that no ID
// given to Destroy reaches outside DIR/instances.
func validID(id string) error {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, `/\`) || strings.HasPrefix(id, ".") {
		return fmt.Errorf("%w: %q", ErrInvalidID, id)
	}
	return nil
}

// recordLoad reads the record of id; the error wraps fs.ErrNotExist when
// there is none.
func (p *Provider) recordLoad(id string) (record, error) {
	var r record
	b, err := os.ReadFile(filepath.Join(p.instanceDir(id), recordFile))
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("record %s: %w", id, err)
	}
	if r.ID != id {
		return r, fmt.Errorf("record %s: names instance %q", id, r.ID)
	}
	return r, nil
}

// recordSave writes r atomically: a reader sees the old record or the new
// one, never half of one.
func (p *Provider) recordSave(r record) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(p.instanceDir(r.ID), recordFile), append(b, '\n'), 0o600)
}

// recordIDs lists the instance dirs, sorted; each may or may not hold a
// record.
func (p *Provider) recordIDs() ([]string, error) {
	entries, err := os.ReadDir(p.instancesDir())
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && validID(e.Name()) == nil {
			ids = append(ids, e.Name())
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// recordDestroy removes the instance's dir: record, data and log.
func (p *Provider) recordDestroy(id string) error {
	if err := os.RemoveAll(p.instanceDir(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
