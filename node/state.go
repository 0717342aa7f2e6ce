// Package node is the agent that runs on every machine: it joins the
// cluster, keeps a heartbeat stream to the leader, watches its own record
// and acts on it. When the record gives it the consensus role it starts
// etcd (as a learner first) and, once it votes, the curator beside it; when
// the role goes it stops both and wipes etcd's data.
package node

import (
	"crypto"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/curatorproject/curator/internal/atomicfile"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// The data dir. Everything a node needs to restart, even when no manager is
// reachable, is here:
//
//	state.json       node ID, cluster ID, address, name
//	node.crt/.key    the node's certificate (cluster CA, role node) and key
//	ca.crt           the cluster CA
//	managers.json    the managers' addresses, updated from the cluster
//	consensus.json   the consensus role's join parameters, while it holds it
//	etcd-crl.der     the etcd CA's revocation list etcd checks, likewise
//	bootstrap.pb     only between `agent init` and the first records in etcd
//	restore.json     only between `agent restore` and its record in etcd
//	etcd/            etcd's data, while it holds the consensus role
//	agent.sock       the local agent service
//	admin/           on the first node: the admin credential and config
const (
	stateFile     = "state.json"
	managersFile  = "managers.json"
	consensusFile = "consensus.json"
	bootstrapFile = "bootstrap.pb"
	restoreFile   = "restore.json"
	etcdCRLFile   = "etcd-crl.der"
	etcdDir       = "etcd"
	socketFile    = "agent.sock"
	nodeCertName  = "node"
	caCertFile    = "ca.crt"
	// AdminDir is where `agent init` writes the admin credential.
	AdminDir = "admin"
)

// State is the node's identity on disk.
type State struct {
	NodeID    string `json:"node_id"`
	ClusterID string `json:"cluster_id"`
	Address   string `json:"address"`
	Name      string `json:"name,omitempty"`
}

// ErrNotInitialised: the data dir holds no node.
var ErrNotInitialised = errors.New("data dir holds no node")

// SocketPath is where a node's local agent service listens.
func SocketPath(dataDir string) string { return filepath.Join(dataDir, socketFile) }

func loadState(dir string) (*State, error) {
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w: run `curator agent init` or `curator agent join` first", dir, ErrNotInitialised)
	}
	if err != nil {
		return nil, err
	}
	st := &State{}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("%s is corrupt: %w", filepath.Join(dir, stateFile), err)
	}
	return st, nil
}

// Initialised says whether dir holds a node.
func Initialised(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, stateFile))
	return err == nil
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(data, '\n'), 0o600)
}

// readJSONRecord reads the JSON record file in dir into a new T; a record
// that is not there is nil, and no error.
func readJSONRecord[T any](dir, file string) (*T, error) {
	data, err := os.ReadFile(filepath.Join(dir, file))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	v := new(T)
	if err := json.Unmarshal(data, v); err != nil {
		return nil, fmt.Errorf("%s is corrupt: %w", file, err)
	}
	return v, nil
}

func saveManagers(dir string, managers []string) error {
	return writeJSON(filepath.Join(dir, managersFile), managers)
}

func loadManagers(dir string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(dir, managersFile))
	if err != nil {
		return nil, err
	}
	var m []string
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s is corrupt: %w", managersFile, err)
	}
	return m, nil
}

// saveConsensus keeps the join parameters of the consensus role, so that a
// manager restarts etcd from disk before it can reach any curator (it may
// be the quorum that every curator waits for).
func saveConsensus(dir string, join *pb.ConsensusJoin) error {
	data, err := protojson.Marshal(join)
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, consensusFile), data, 0o600)
}

// loadConsensus returns nil, nil when the node has no consensus role.
func loadConsensus(dir string) (*pb.ConsensusJoin, error) {
	data, err := os.ReadFile(filepath.Join(dir, consensusFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	join := &pb.ConsensusJoin{}
	if err := protojson.Unmarshal(data, join); err != nil {
		return nil, fmt.Errorf("%s is corrupt: %w", consensusFile, err)
	}
	return join, nil
}

// identity is the node's key and certificates, loaded from disk. certs
// holds the current certificate (with the CA in its chain): every TLS
// configuration of the agent and its curator reads it at each handshake,
// and a renewal replaces it (certs.go).
type identity struct {
	key   crypto.Signer
	cert  *x509.Certificate
	ca    *x509.Certificate
	certs *pki.CertSource
}

func loadIdentity(dir string) (*identity, error) {
	cert, key, err := pki.ReadFiles(dir, nodeCertName)
	if err != nil {
		return nil, fmt.Errorf("node certificate: %w", err)
	}
	ca, err := pki.ReadCert(filepath.Join(dir, caCertFile))
	if err != nil {
		return nil, fmt.Errorf("cluster CA: %w", err)
	}
	return &identity{key: key, cert: cert, ca: ca, certs: pki.NewCertSource(pki.TLSCertificate(cert, key, ca))}, nil
}
