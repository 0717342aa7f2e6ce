package node

import (
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/client"
	"github.com/curatorproject/curator/consensus"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/internal/atomicfile"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// InitConfig is what `curator agent init` takes.
type InitConfig struct {
	DataDir      string
	Address      string
	Name         string
	Availability pb.Availability
	Version      string
	Machine      Machine
	// ClusterID names the new cluster; empty means a new random one. A
	// cluster's first machine made by a provider is labelled with it
	// before the cluster exists.
	ClusterID string
	// CertTTL is the cluster's cert_ttl (spec.CheckCertTTL); 0 means
	// spec.DefaultCertTTL.
	CertTTL time.Duration
}

// Machine is what a node made by a group's provider knows of its machine:
// its group, the provider's instance ID, the config SHA it was made from,
// and the group's node labels. The zero Machine is a node made by hand.
type Machine struct {
	Group      string
	InstanceID string
	ConfigSHA  string
	Labels     map[string]string
}

func (m Machine) validate() error {
	if err := spec.ValidateMachine(m.Group, m.InstanceID, m.ConfigSHA, m.Labels); err != nil {
		return fmt.Errorf("--group, --instance-id, --config-sha, --label: %w", err)
	}
	return nil
}

// InitResult says where init put what a person needs next.
type InitResult struct {
	NodeID      string
	ClusterID   string
	AdminConfig string
	// The first join tokens.
	WorkerToken, ManagerToken string
}

// bootstrapRecord is what the first node writes into etcd once etcd is up:
// kept on disk (bootstrap.pb, 0600) from init until then, and deleted after.
type bootstrapRecord struct {
	ClusterID    string `json:"cluster_id"`
	PKI          []byte `json:"pki"`
	Node         []byte `json:"node"`
	WorkerToken  string `json:"worker_token"`
	ManagerToken string `json:"manager_token"`
	// CertTTL is the cluster's cert_ttl (nanoseconds; 0 in a record of an
	// older init: the default).
	CertTTL time.Duration `json:"cert_ttl,omitempty"`
}

// ErrAlreadyInitialised: init or join on a data dir that holds a node.
var ErrAlreadyInitialised = errors.New("data dir already holds a node")

// Init prepares dataDir as the first node of a new cluster: the cluster CA
// and the etcd CA, the node's key and certificates, the admin credential
// and client config. It does not start anything: Run does, and the first
// run bootstraps etcd and writes the cluster's records.
//
// It refuses, and writes nothing, unless the data dir is new or empty (log
// files aside: an operator may send the agent's output there) and the
// node's four ports are free: a data dir that holds a node is that node's
// (`agent run` restarts it; a copy run beside it would be a second instance
// of the same node), and one that holds anything else is not ours to fill.
func Init(cfg InitConfig) (*InitResult, error) {
	dir := cfg.DataDir
	ip, port, err := checkNewNode(dir, cfg.Address, cfg.Name)
	if err != nil {
		return nil, err
	}
	if err := cfg.Machine.validate(); err != nil {
		return nil, err
	}
	if err := spec.ValidateClusterID(cfg.ClusterID); cfg.ClusterID != "" && err != nil {
		return nil, fmt.Errorf("--cluster-id: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, etcdDir)); err == nil {
		return nil, fmt.Errorf("%s holds etcd data but no node: an earlier init did not finish; remove %s and run init again", dir, dir)
	}
	if err := checkEmpty(dir); err != nil {
		return nil, err
	}
	if err := checkPortsFree(cfg.Address); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := pki.NewCA("curator cluster CA")
	if err != nil {
		return nil, err
	}
	etcdCA, err := ca.NewIntermediate("curator etcd CA")
	if err != nil {
		return nil, err
	}
	key, id, err := pki.NewNodeKey()
	if err != nil {
		return nil, err
	}
	certTTL := cfg.CertTTL
	if certTTL == 0 {
		certTTL = spec.DefaultCertTTL
	} else if err := spec.CheckCertTTL(certTTL); err != nil {
		return nil, fmt.Errorf("--cert-ttl: %w", err)
	}
	m, err := issueManager(ca, etcdCA, key, id, cfg.Name, ip, port, certTTL)
	if err != nil {
		return nil, err
	}
	nodeCert, adminCert, adminKey, name := m.nodeCert, m.adminCert, m.adminKey, m.name
	clusterID := cfg.ClusterID
	if clusterID == "" {
		if clusterID, err = spec.NewClusterID(); err != nil {
			return nil, err
		}
	}
	workerTok, err := pki.NewToken(ca.Cert)
	if err != nil {
		return nil, err
	}
	managerTok, err := pki.NewToken(ca.Cert)
	if err != nil {
		return nil, err
	}
	availability := cfg.Availability
	if availability == pb.Availability_AVAILABILITY_UNSPECIFIED {
		availability = pb.Availability_AVAILABILITY_ACTIVE
	}
	crl, err := etcdCA.NewCRL(nil, 1)
	if err != nil {
		return nil, err
	}
	join := m.join
	join.EtcdCrl = crl
	first := &pb.Node{
		Id: id, Name: name, Address: cfg.Address,
		Roles:        []pb.Role{pb.Role_ROLE_CONSENSUS, pb.Role_ROLE_WORKER},
		Availability: availability,
		Version:      cfg.Version,
		PublicKey:    m.publicKey,
		Consensus:    join,
		Group:        cfg.Machine.Group,
		InstanceId:   cfg.Machine.InstanceID,
		ConfigSha:    cfg.Machine.ConfigSHA,
		Labels:       cfg.Machine.Labels,
		CertExpires:  timestamppb.New(nodeCert.NotAfter),
	}
	caKey, err := pki.EncodeKey(ca.Key)
	if err != nil {
		return nil, err
	}
	etcdCAKey, err := pki.EncodeKey(etcdCA.Key)
	if err != nil {
		return nil, err
	}
	pkiBytes, err := proto.Marshal(&pb.PKIState{
		CaCert: pki.EncodeCert(ca.Cert), CaKey: caKey,
		EtcdCaCert: pki.EncodeCert(etcdCA.Cert), EtcdCaKey: etcdCAKey,
	})
	if err != nil {
		return nil, err
	}
	nodeBytes, err := proto.Marshal(first)
	if err != nil {
		return nil, err
	}

	// Everything is made; now write it, state.json last: until it exists
	// the data dir holds no node and init may be run again.
	if err := pki.WriteFiles(dir, nodeCertName, nodeCert, key); err != nil {
		return nil, err
	}
	if err := atomicfile.Write(filepath.Join(dir, caCertFile), pki.EncodeCert(ca.Cert), 0o644); err != nil {
		return nil, err
	}
	if err := saveConsensus(dir, join); err != nil {
		return nil, err
	}
	if err := writeJSON(filepath.Join(dir, bootstrapFile), bootstrapRecord{ClusterID: clusterID, PKI: pkiBytes, Node: nodeBytes, WorkerToken: workerTok.String(), ManagerToken: managerTok.String(), CertTTL: certTTL}); err != nil {
		return nil, err
	}
	if err := saveManagers(dir, []string{cfg.Address}); err != nil {
		return nil, err
	}
	adminPath, err := client.WriteAdminConfig(filepath.Join(dir, AdminDir), clusterID, []string{cfg.Address}, ca.Cert, adminCert, adminKey)
	if err != nil {
		return nil, fmt.Errorf("write admin config: %w", err)
	}
	st := &State{NodeID: id, ClusterID: clusterID, Address: cfg.Address, Name: name}
	if err := writeJSON(filepath.Join(dir, stateFile), st); err != nil {
		return nil, err
	}
	return &InitResult{NodeID: id, ClusterID: clusterID, AdminConfig: adminPath, WorkerToken: workerTok.String(), ManagerToken: managerTok.String()}, nil
}

func loadBootstrap(dir string) (*bootstrapRecord, error) {
	return readJSONRecord[bootstrapRecord](dir, bootstrapFile)
}

// checkNewNode checks the flags every command that makes a node (init,
// join, restore) shares: a data dir that holds no node, an IP:PORT to
// listen on, which it returns split, and the name if one is given.
func checkNewNode(dir, address, name string) (net.IP, int, error) {
	if dir == "" {
		return nil, 0, errors.New("--data-dir is required")
	}
	if err := checkNoNode(dir); err != nil {
		return nil, 0, err
	}
	ip, port, err := spec.SplitAddress(address)
	if err != nil {
		return nil, 0, fmt.Errorf("--listen: %w", err)
	}
	if name != "" {
		if err := spec.ValidateNodeName(name); err != nil {
			return nil, 0, fmt.Errorf("--name: %w", err)
		}
	}
	return ip, port, nil
}

// checkPortsFree is CheckPorts with what to do, before anything is
// written.
func checkPortsFree(address string) error {
	if err := CheckPorts(address); err != nil {
		return fmt.Errorf("%w: stop that process, or pick another --listen address (a node needs PORT to PORT+3); nothing was written", err)
	}
	return nil
}

// checkNoNode refuses a data dir that holds a node.
func checkNoNode(dir string) error {
	st, err := loadState(dir)
	switch {
	case err == nil:
		return fmt.Errorf("%w: %s holds node %s (listening on %s): start it with `curator agent run --data-dir %s`; to make a new node, give an empty or new --data-dir",
			ErrAlreadyInitialised, dir, st.NodeID, st.Address, dir)
	case Initialised(dir):
		return fmt.Errorf("%w: %s holds a node whose state cannot be read (%v): start it with `curator agent run --data-dir %s` to see why", ErrAlreadyInitialised, dir, err, dir)
	}
	return nil
}

// checkEmpty refuses a data dir that exists and holds anything but log
// files.
func checkEmpty(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var other []string
	for _, e := range entries {
		if e.Type().IsRegular() && filepath.Ext(e.Name()) == ".log" {
			continue
		}
		other = append(other, e.Name())
	}
	if len(other) == 0 {
		return nil
	}
	shown := other
	if len(shown) > 5 {
		shown = append(shown[:5:5], fmt.Sprintf("and %d more", len(other)-5))
	}
	return fmt.Errorf("%s is not empty (it holds %s): init puts a new cluster's keys there; give an empty or new --data-dir (if an earlier init was cut short, remove %s first)",
		dir, strings.Join(shown, ", "), dir)
}

// managerIdentity is what the one manager of a new cluster (init) or of a
// restored one (restore) is issued: its node and etcd certificates, the
// first admin certificate, and its etcd join parameters as its own peer.
type managerIdentity struct {
	nodeCert, adminCert *x509.Certificate
	adminKey            crypto.Signer
	// publicKey is the node's key in PKIX DER, as its record holds it;
	// name its name (the given one, or its ID cut short).
	publicKey []byte
	name      string
	join      *pb.ConsensusJoin
}

// issueManager issues node id (key, at ip:port, named name or after its
// ID) its certificates under ca and etcdCA, valid for ttl.
func issueManager(ca, etcdCA *pki.CA, key crypto.Signer, id, name string, ip net.IP, port int, ttl time.Duration) (*managerIdentity, error) {
	ips := []net.IP{ip}
	nodeCert, err := ca.Issue(pki.CertRequest{PublicKey: key.Public(), NodeID: id, Role: pki.RoleNode, IPs: ips, Validity: ttl})
	if err != nil {
		return nil, err
	}
	etcdCert, err := etcdCA.Issue(pki.CertRequest{PublicKey: key.Public(), NodeID: id, Role: pki.RoleConsensus, IPs: ips, Validity: ttl})
	if err != nil {
		return nil, err
	}
	adminKey, err := pki.NewKey()
	if err != nil {
		return nil, err
	}
	adminCert, err := ca.Issue(pki.CertRequest{PublicKey: adminKey.Public(), NodeID: "admin", Role: pki.RoleAdmin, Validity: spec.AdminCertValidity})
	if err != nil {
		return nil, err
	}
	pubDER, err := pkixPublicKey(key)
	if err != nil {
		return nil, err
	}
	if name == "" {
		name = id[:12]
	}
	return &managerIdentity{
		nodeCert: nodeCert, adminCert: adminCert, adminKey: adminKey, publicKey: pubDER, name: name,
		join: &pb.ConsensusJoin{
			Peers:    []*pb.ConsensusPeer{{NodeId: id, PeerUrl: consensus.PeerURL(ip.String(), port)}},
			EtcdCert: pki.EncodeCert(etcdCert),
			EtcdCa:   pki.EncodeCert(etcdCA.Cert),
		},
	}, nil
}
