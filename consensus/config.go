package consensus

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/curatorproject/curator/internal/nodeport"
)

// Defaults, applied by Config.withDefaults and nowhere else.
const (
	DefaultReadyTimeout   = time.Minute
	DefaultStatusInterval = 200 * time.Millisecond
	DefaultEtcdLogLevel   = zapcore.WarnLevel
)

// Port offsets from a node's base port (internal/nodeport): the node's
// gRPC API listens at the base port, etcd's peer port is one above, its
// client port two above.
const (
	peerPortOffset   = nodeport.EtcdPeer
	clientPortOffset = nodeport.EtcdClient
	maxBasePort      = 65535 - clientPortOffset
)

// StartMode says how a node's etcd comes up when its data dir holds no etcd
// member yet. A data dir that does hold one (an etcd WAL under
// DataDir/member/wal) is always restarted from, whatever the mode: the member
// exists and its identity lives in that data, so bootstrapping or joining
// again would only fail or, worse, fork the cluster.
type StartMode int

const (
	// ModeRestart only restarts from an existing data dir; without one, Run
	// fails. It is the zero value so that a node that lost its data never
	// founds a new cluster by accident.
	ModeRestart StartMode = iota
	// ModeBootstrap founds a new single-member cluster.
	ModeBootstrap
	// ModeJoin joins an existing cluster as a learner, from Config.Join.
	ModeJoin
)

func (m StartMode) String() string {
	switch m {
	case ModeRestart:
		return "restart"
	case ModeBootstrap:
		return "bootstrap"
	case ModeJoin:
		return "join"
	}
	return "StartMode(" + strconv.Itoa(int(m)) + ")"
}

// MaxLearners is how many learners etcd accepts at once: every member of a
// largest cluster (seven) could be catching up at the same time.
const MaxLearners = 7

// Peer is one etcd member as a joining node must know it.
type Peer struct {
	// NodeID is the member's name. It is empty for another learner that has
	// not started yet.
	NodeID  string `json:"node_id"`
	PeerURL string `json:"peer_url"`
}

// JoinParams is what a node needs to join an existing cluster as a learner.
// AddLearner returns it; the curator hands it to the node (it is plain data,
// so it travels as JSON or protobuf).
type JoinParams struct {
	// Peers are all members of the cluster, voters and learners, the new
	// learner included (under its own node ID), each with its peer URL. etcd
	// checks this list against the cluster's own.
	Peers []Peer `json:"peers"`
	// ClusterID is the ID of the cluster joined. A node refuses to run a
	// data dir of another cluster with these parameters (ErrOtherCluster).
	ClusterID uint64 `json:"cluster_id"`
	// MemberID is the etcd member ID the new learner was given.
	MemberID uint64 `json:"member_id"`
}

// initialCluster renders the peers as etcd's --initial-cluster.
func (p JoinParams) initialCluster() string {
	parts := make([]string, len(p.Peers))
	for i, peer := range p.Peers {
		parts[i] = peer.NodeID + "=" + peer.PeerURL
	}
	return strings.Join(parts, ",")
}

// Config is the configuration of one node's etcd. Zero values mean the
// defaults; Validate says what is wrong with the rest.
type Config struct {
	// NodeID is the node's ID, used as the etcd member name.
	NodeID string
	// DataDir holds etcd's data (DataDir/member) and, when the TLS material
	// is given as PEM bytes, the files etcd reads it from (DataDir/tls).
	// It belongs to this package: Leave deletes it.
	DataDir string
	// ListenIP is the address etcd listens on and advertises, e.g.
	// "127.0.0.2". Not a wildcard: peers must be able to dial it.
	ListenIP string
	// Port is the node's base port: etcd's peer port is Port+1, its client
	// port Port+2.
	Port int

	// Mode says how to start when DataDir holds no member yet.
	Mode StartMode
	// Join is required with ModeJoin.
	Join *JoinParams
	// ForceNewCluster restarts an existing member as the only member of its
	// cluster, with all its data (etcd's --force-new-cluster): every other
	// member is removed. It is the way back from a lost quorum when the
	// other members are gone for good, and only for that: give it for one
	// start. A data dir that holds no member is refused.
	ForceNewCluster bool

	// TLS: the node's etcd certificate and key (issued by the etcd CA, with
	// ListenIP as an IP SAN) and the etcd CA certificate, the only trust
	// anchor for both peer and client traffic. Each as PEM bytes or as a
	// file path, not both. Files are read again by etcd on every handshake,
	// so replacing them rotates the certificate.
	CertPEM, KeyPEM, CAPEM    []byte
	CertFile, KeyFile, CAFile string
	// CRLFile, if set, is a revocation list (DER) of the etcd CA that etcd
	// reads on every handshake, peer and client: certificates of demoted
	// and removed nodes. It must exist when Run starts; replacing it takes
	// effect for the next connection.
	CRLFile string

	// Logger receives this package's logs and etcd's, the latter named
	// "etcd" and filtered to EtcdLogLevel. Nil means no logs.
	Logger *zap.Logger
	// EtcdLogLevel selects which of etcd's own logs are kept. Nil means
	// warn and above: etcd is chatty at info.
	EtcdLogLevel zapcore.LevelEnabler
	// ReadyTimeout bounds how long Run waits for etcd to be ready (to have
	// joined the cluster and published itself, which needs a quorum). Run
	// then fails, saying why if it can tell, and its supervisor restarts
	// it: a cluster that restarts as a whole forms as soon as a majority
	// of members is waiting at once.
	ReadyTimeout time.Duration
	// StatusInterval is how often Run refreshes Status (learner or voter).
	StatusInterval time.Duration
	// TickMs and ElectionMs override etcd's heartbeat interval and election
	// timeout (zero: etcd's defaults, 100 and 1000). Tests shorten them.
	TickMs, ElectionMs uint

	// Ready, if set, is called by Run with Run's context each time etcd has
	// become ready; it must not block. The node agent signals
	// supervisor.Healthy there.
	Ready func(ctx context.Context)
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.EtcdLogLevel == nil {
		c.EtcdLogLevel = DefaultEtcdLogLevel
	}
	c.ReadyTimeout = cmp.Or(c.ReadyTimeout, DefaultReadyTimeout)
	c.StatusInterval = cmp.Or(c.StatusInterval, DefaultStatusInterval)
	return c
}

// Validate checks the configuration, defaults applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.NodeID == "" {
		errs = append(errs, errors.New("node ID is empty"))
	} else if strings.ContainsAny(c.NodeID, "=,") {
		errs = append(errs, fmt.Errorf("node ID %q contains '=' or ','", c.NodeID))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("data dir is empty"))
	}
	if ip := net.ParseIP(c.ListenIP); ip == nil {
		errs = append(errs, fmt.Errorf("listen IP %q is not an IP address", c.ListenIP))
	} else if ip.IsUnspecified() {
		errs = append(errs, fmt.Errorf("listen IP %s is a wildcard: give the address peers dial", c.ListenIP))
	}
	if c.Port < 1 || c.Port > maxBasePort {
		errs = append(errs, fmt.Errorf("port %d is out of range 1-%d", c.Port, maxBasePort))
	}
	for _, f := range []struct {
		name string
		pem  []byte
		file string
	}{{"certificate", c.CertPEM, c.CertFile}, {"key", c.KeyPEM, c.KeyFile}, {"CA certificate", c.CAPEM, c.CAFile}} {
		if (len(f.pem) == 0) == (f.file == "") {
			errs = append(errs, fmt.Errorf("give the %s either as PEM or as a file, exactly one", f.name))
		}
	}
	switch c.Mode {
	case ModeRestart, ModeBootstrap:
		if c.Join != nil {
			errs = append(errs, fmt.Errorf("join parameters given with start mode %s", c.Mode))
		}
	case ModeJoin:
		if err := c.validateJoin(); err != nil {
			errs = append(errs, err)
		}
	default:
		errs = append(errs, fmt.Errorf("unknown start mode %d", int(c.Mode)))
	}
	if c.ReadyTimeout < 0 || c.StatusInterval < 0 {
		errs = append(errs, errors.New("ready timeout and status interval must not be negative"))
	}
	if (c.TickMs == 0) != (c.ElectionMs == 0) {
		errs = append(errs, errors.New("set both TickMs and ElectionMs, or neither"))
	} else if c.TickMs != 0 && c.ElectionMs < 5*c.TickMs {
		errs = append(errs, fmt.Errorf("election timeout %dms must be at least 5 heartbeats of %dms", c.ElectionMs, c.TickMs))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("consensus config: %w", err)
	}
	return nil
}

func (c Config) validateJoin() error {
	if c.Join == nil {
		return errors.New("start mode join needs join parameters")
	}
	self := PeerURL(c.ListenIP, c.Port)
	found := false
	for _, p := range c.Join.Peers {
		if _, err := url.Parse(p.PeerURL); err != nil || p.PeerURL == "" {
			return fmt.Errorf("join parameters: bad peer URL %q", p.PeerURL)
		}
		if strings.ContainsAny(p.NodeID, "=,") {
			return fmt.Errorf("join parameters: node ID %q contains '=' or ','", p.NodeID)
		}
		if p.NodeID == c.NodeID {
			if p.PeerURL != self {
				return fmt.Errorf("join parameters: this node was added with peer URL %s, but it listens at %s", p.PeerURL, self)
			}
			found = true
		}
	}
	if !found {
		return fmt.Errorf("join parameters: this node (%s) is not among the peers: add it as a learner first", c.NodeID)
	}
	return nil
}

// PeerURL is the etcd peer URL of a node listening at ip with base port
// port: https://ip:port+1.
func PeerURL(ip string, port int) string {
	return "https://" + net.JoinHostPort(ip, strconv.Itoa(port+peerPortOffset))
}

// ClientURL is the etcd client URL of a node listening at ip with base port
// port: https://ip:port+2.
func ClientURL(ip string, port int) string {
	return "https://" + net.JoinHostPort(ip, strconv.Itoa(port+clientPortOffset))
}

// tlsFiles are the paths etcd reads its TLS material from.
type tlsFiles struct {
	cert, key, ca string
}

// prepareTLS returns the files etcd should read, writing PEM material given
// as bytes to DataDir/tls first.
func (c Config) prepareTLS() (tlsFiles, error) {
	files := tlsFiles{cert: c.CertFile, key: c.KeyFile, ca: c.CAFile}
	dir := filepath.Join(c.DataDir, "tls")
	for _, f := range []struct {
		pem  []byte
		path *string
		name string
		mode os.FileMode
	}{
		{c.CertPEM, &files.cert, "etcd.crt", 0o644},
		{c.KeyPEM, &files.key, "etcd.key", 0o600},
		{c.CAPEM, &files.ca, "etcd-ca.crt", 0o644},
	} {
		if len(f.pem) == 0 {
			continue
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return tlsFiles{}, fmt.Errorf("write TLS files: %w", err)
		}
		*f.path = filepath.Join(dir, f.name)
		if err := os.WriteFile(*f.path, f.pem, f.mode); err != nil {
			return tlsFiles{}, fmt.Errorf("write TLS files: %w", err)
		}
	}
	return files, nil
}

// loadTLS returns the node's certificate and the etcd CA, for clients.
func (c Config) loadTLS() (tls.Certificate, *x509.Certificate, error) {
	read := func(b []byte, path string) ([]byte, error) {
		if len(b) > 0 {
			return b, nil
		}
		return os.ReadFile(path)
	}
	certPEM, err := read(c.CertPEM, c.CertFile)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("load TLS: %w", err)
	}
	keyPEM, err := read(c.KeyPEM, c.KeyFile)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("load TLS: %w", err)
	}
	caPEM, err := read(c.CAPEM, c.CAFile)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("load TLS: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("load TLS: node certificate: %w", err)
	}
	block, _ := pem.Decode(caPEM)
	if block == nil {
		return tls.Certificate{}, nil, errors.New("load TLS: CA certificate: no PEM block")
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("load TLS: CA certificate: %w", err)
	}
	return cert, ca, nil
}
