package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/client"
	"github.com/curatorproject/curator/consensus"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/internal/atomicfile"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// RestoreConfig is what `curator agent restore` takes.
type RestoreConfig struct {
	DataDir string
	Address string
	// From is the backup file (`curator cluster backup`).
	From    string
	Name    string
	Version string
	Logger  *zap.Logger
}

// RestoreResult says what was restored and where the admin config is.
type RestoreResult struct {
	InitResult
	// Nodes is how many node records the backup held.
	Nodes int
}

// restoreRecord is the restored node's record, kept on disk (restore.json,
// 0600) from restore until its first run has written it into etcd
// (store.Recover), and deleted after.
type restoreRecord struct {
	Node []byte `json:"node"`
}

// Restore prepares dataDir as the only manager of a cluster restored from
// a backup: it checks the backup's checksum, restores it as a new
// one-member etcd cluster (new cluster and member IDs: no member of the
// old cluster can join it), and makes this node a fresh identity with
// certificates from the backup's CAs, and a new admin credential. Like
// Init it starts nothing; the first run writes the node's record and
// clears the old managers (store.Recover).
//
// It refuses, and leaves everything as it found it, unless the backup is
// whole, the data dir is new or empty and the four ports are free.
func Restore(cfg RestoreConfig) (res *RestoreResult, err error) {
	dir := cfg.DataDir
	if cfg.From == "" {
		return nil, errors.New("--from is required: the backup file `curator cluster backup` wrote")
	}
	ip, port, err := checkNewNode(dir, cfg.Address, cfg.Name)
	if err != nil {
		return nil, err
	}
	if err := checkEmpty(dir); err != nil {
		return nil, err
	}
	if _, err := consensus.VerifySnapshot(cfg.From); err != nil {
		return nil, fmt.Errorf("%s: %w; nothing was changed", cfg.From, err)
	}
	if err := checkPortsFree(cfg.Address); err != nil {
		return nil, err
	}
	key, id, err := pki.NewNodeKey()
	if err != nil {
		return nil, err
	}

	// etcd's data is restored beside the data dir, and moved in last.
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(abs), ".curator-restore-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	restored, err := consensus.RestoreSnapshot(cfg.From, filepath.Join(tmp, etcdDir), id, ip.String(), port, store.RecordPrefix, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("%s: %w; nothing was changed", cfg.From, err)
	}
	backup, err := store.ReadBackup(restored.Keys)
	if err != nil {
		return nil, fmt.Errorf("%s: %w; nothing was changed", cfg.From, err)
	}

	m, err := issueManager(backup.CA, backup.EtcdCA, key, id, cfg.Name, ip, port, backup.CertTTL)
	if err != nil {
		return nil, err
	}
	nodeCert, adminCert, adminKey, name := m.nodeCert, m.adminCert, m.adminKey, m.name
	join := m.join
	join.EtcdCrl, join.MemberId, join.EtcdClusterId = backup.EtcdCRL, restored.MemberID, restored.ClusterID
	self := &pb.Node{
		Id: id, Name: name, Address: cfg.Address,
		Roles:        []pb.Role{pb.Role_ROLE_CONSENSUS, pb.Role_ROLE_WORKER},
		Availability: pb.Availability_AVAILABILITY_ACTIVE,
		Version:      cfg.Version,
		PublicKey:    m.publicKey,
		Consensus:    join,
		JoinedAs:     "manager",
		CertExpires:  timestamppb.New(nodeCert.NotAfter),
	}
	nodeBytes, err := proto.Marshal(self)
	if err != nil {
		return nil, err
	}

	// Everything is made; now write it, state.json last. On an error,
	// what was written goes again.
	existed := true
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		existed = false
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	defer func() {
		if err == nil {
			return
		}
		if !existed {
			os.RemoveAll(dir)
			return
		}
		for _, f := range []string{nodeCertName + ".crt", nodeCertName + ".key", caCertFile, consensusFile, restoreFile, managersFile, AdminDir, etcdDir, "tls"} {
			os.RemoveAll(filepath.Join(dir, f))
		}
	}()
	if err = pki.WriteFiles(dir, nodeCertName, nodeCert, key); err != nil {
		return nil, err
	}
	if err = atomicfile.Write(filepath.Join(dir, caCertFile), pki.EncodeCert(backup.CA.Cert), 0o644); err != nil {
		return nil, err
	}
	if err = saveConsensus(dir, join); err != nil {
		return nil, err
	}
	if err = writeJSON(filepath.Join(dir, restoreFile), restoreRecord{Node: nodeBytes}); err != nil {
		return nil, err
	}
	if err = saveManagers(dir, []string{cfg.Address}); err != nil {
		return nil, err
	}
	adminPath, err := client.WriteAdminConfig(filepath.Join(dir, AdminDir), backup.ClusterID, []string{cfg.Address}, backup.CA.Cert, adminCert, adminKey)
	if err != nil {
		return nil, fmt.Errorf("write admin config: %w", err)
	}
	if err = os.Rename(filepath.Join(tmp, etcdDir), filepath.Join(dir, etcdDir)); err != nil {
		return nil, err
	}
	st := &State{NodeID: id, ClusterID: backup.ClusterID, Address: cfg.Address, Name: name}
	if err = writeJSON(filepath.Join(dir, stateFile), st); err != nil {
		return nil, err
	}
	return &RestoreResult{
		InitResult: InitResult{NodeID: id, ClusterID: backup.ClusterID, AdminConfig: adminPath, WorkerToken: backup.WorkerToken, ManagerToken: backup.ManagerToken},
		Nodes:      backup.Nodes,
	}, nil
}

func loadRestore(dir string) (*restoreRecord, error) {
	return readJSONRecord[restoreRecord](dir, restoreFile)
}
