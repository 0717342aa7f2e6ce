package consensus

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.etcd.io/etcd/server/v3/storage/schema"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
)

// A backup is an etcd snapshot as etcd's Maintenance.Snapshot streams it:
// the member's database (bbolt pages, a multiple of 512 bytes), then the
// SHA-256 of the database. That trailer is the backup's checksum: a file
// that was cut short or changed no longer matches it.

// ErrBadSnapshot: a backup file is damaged, truncated or not a backup.
var ErrBadSnapshot = errors.New("backup file is damaged or not a curator backup")

// VerifySnapshot checks the file at path: the SHA-256 trailer must match
// the database before it. It returns the file's size.
func VerifySnapshot(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	return fi.Size(), verifySnapshot(f, fi.Size())
}

func verifySnapshot(r io.Reader, size int64) error {
	if size < 512+sha256.Size || size%512 != sha256.Size {
		return fmt.Errorf("%w: it is %d bytes, which is not a database plus its checksum (was it cut short while copying?)", ErrBadSnapshot, size)
	}
	h := sha256.New()
	if _, err := io.CopyN(h, r, size-sha256.Size); err != nil {
		return fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	want := make([]byte, sha256.Size)
	if _, err := io.ReadFull(r, want); err != nil {
		return fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	if !bytes.Equal(h.Sum(nil), want) {
		return fmt.Errorf("%w: its checksum does not match its contents", ErrBadSnapshot)
	}
	return nil
}

// Restored is what RestoreSnapshot made.
type Restored struct {
	MemberID, ClusterID uint64
	// Keys are the latest values of the keys under the prefix asked for.
	Keys map[string][]byte
}

// RestoreSnapshot makes dataDir (which must not exist) an etcd data dir
// of a new one-member cluster that holds every key of the backup at path:
// the member is named nodeID and reached at ip and port (Port+1 for
// peers). The cluster is new (a random token): its cluster and member IDs
// are not the old ones, so no member of the old cluster can ever join it.
// It checks the file first; on any error, dataDir is removed again. It
// returns the new IDs and the keys under prefix, read from the restored
// database.
func RestoreSnapshot(path, dataDir, nodeID, ip string, port int, prefix string, lg *zap.Logger) (*Restored, error) {
	if lg == nil {
		lg = zap.NewNop()
	}
	if _, err := VerifySnapshot(path); err != nil {
		return nil, err
	}
	if _, err := os.Stat(dataDir); err == nil {
		return nil, fmt.Errorf("restore: %s exists already", dataDir)
	}
	peer := PeerURL(ip, port)
	token := "curator-" + randomHex(8)
	initial := nodeID + "=" + peer
	if err := snapshot.NewV3(lg).Restore(snapshot.RestoreConfig{
		SnapshotPath: path, Name: nodeID, OutputDataDir: dataDir,
		PeerURLs: []string{peer}, InitialCluster: initial, InitialClusterToken: token,
	}); err != nil {
		os.RemoveAll(dataDir)
		return nil, fmt.Errorf("restore the backup: %w", err)
	}
	urls, err := types.NewURLsMap(initial)
	if err != nil {
		os.RemoveAll(dataDir)
		return nil, err
	}
	cl, err := membership.NewClusterFromURLsMap(lg, token, urls)
	if err != nil {
		os.RemoveAll(dataDir)
		return nil, err
	}
	keys, err := readKeys(filepath.Join(dataDir, "member", "snap", "db"), prefix)
	if err != nil {
		os.RemoveAll(dataDir)
		return nil, fmt.Errorf("read the restored data: %w", err)
	}
	return &Restored{MemberID: uint64(cl.MemberIDs()[0]), ClusterID: uint64(cl.ID()), Keys: keys}, nil
}

// readKeys returns the latest value of every live key under prefix in an
// etcd database, read without starting etcd: the key bucket holds every
// revision of every key, in revision order, a deletion as a tombstone.
func readKeys(dbPath, prefix string) (map[string][]byte, error) {
	db, err := bolt.Open(dbPath, 0o400, &bolt.Options{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	out := map[string][]byte{}
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(schema.Key.Name())
		if b == nil {
			return errors.New("no key bucket: not an etcd database")
		}
		return b.ForEach(func(k, v []byte) error {
			var kv mvccpb.KeyValue
			if err := proto.Unmarshal(v, &kv); err != nil {
				return fmt.Errorf("revision %x: %w", k, err)
			}
			key := string(kv.Key)
			if !strings.HasPrefix(key, prefix) {
				return nil
			}
			if mvcc.IsTombstone(k) {
				delete(out, key)
			} else {
				out[key] = kv.Value
			}
			return nil
		})
	})
	return out, err
}
