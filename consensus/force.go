package consensus

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/server/v3/storage/schema"
)

// CheckForceNewCluster says whether a new cluster may be forced from the
// etcd data dir dataDir of node nodeID (see checkVoterData): nil, or why
// not and what to do instead. Run checks it again before it starts etcd.
func CheckForceNewCluster(dataDir, nodeID string) error { return checkVoterData(dataDir, nodeID) }

// checkVoterData refuses to force a new cluster from dataDir unless its
// member, named nodeID, was a voter as its own data last recorded. A
// learner's data may lack entries the cluster had committed (it was still
// catching up: a manager lost a moment after it joined), and etcd, forced
// to make a cluster of a learner alone, panics ("removed all voters"); a
// member whose name is not in its data never finished joining. Either way
// the operator is to force another survivor, or restore a backup.
//
// It reads etcd's members bucket without starting etcd, as readKeys reads
// the keys.
func checkVoterData(dataDir, nodeID string) error {
	const advice = "its data may lack what the cluster had committed, so no new cluster is forced from it: force one on another surviving manager that was a voter, or restore a backup (`curator agent restore`)"
	path := filepath.Join(dataDir, "member", "snap", "db")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s holds no etcd data: this manager's etcd never ran; %s", ErrNotVoter, dataDir, advice)
	}
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return fmt.Errorf("read the member of %s: %w", dataDir, err)
	}
	defer db.Close()
	type member struct {
		Name      string `json:"name"`
		IsLearner bool   `json:"isLearner"`
	}
	var self *member
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(schema.Members.Name())
		if b == nil {
			return nil
		}
		return b.ForEach(func(_, v []byte) error {
			var m member
			if err := json.Unmarshal(v, &m); err != nil {
				return err
			}
			if m.Name == nodeID {
				self = &m
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("read the member of %s: %w", dataDir, err)
	}
	switch {
	case self == nil:
		return fmt.Errorf("%w: the member in %s never finished joining; %s", ErrNotVoter, dataDir, advice)
	case self.IsLearner:
		return fmt.Errorf("%w: the member in %s was a learner, still catching up, when the cluster was lost; %s", ErrNotVoter, dataDir, advice)
	}
	return nil
}
