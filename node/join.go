package node

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/internal/atomicfile"
	"github.com/curatorproject/curator/internal/backoff"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/transport"
)

// JoinConfig is what `curator agent join` takes.
type JoinConfig struct {
	DataDir      string
	Address      string
	Name         string
	Token        string
	Managers     []string
	Availability pb.Availability
	Version      string
	Machine      Machine
	// Timeout bounds the whole join (default a minute): managers that are
	// unreachable or have no leader yet are retried until then.
	Timeout time.Duration
}

// Join registers a new node with the cluster and writes its identity into
// the data dir. It trusts the cluster only if its CA has the fingerprint in
// the token.
//
// A join that fails leaves the data dir as it found it: it checks the
// flags, the data dir (which must hold no node) and the node's four ports
// before anything else, and the node's key stays in memory until the
// cluster has registered the node. From then on the registration is real:
// should writing the node's files fail, the key is kept, and running join
// again picks the same node up (the leader hands it its certificate again).
//
// The join's connection is returned if the manager took it for the
// node's (Registration.Conn), for the agent's first session
// (Config.JoinConn); the caller closes it otherwise.
func Join(ctx context.Context, cfg JoinConfig) (_ *State, _ *JoinConn, err error) {
	dir := cfg.DataDir
	if _, _, err := checkNewNode(dir, cfg.Address, cfg.Name); err != nil {
		return nil, nil, err
	}
	tok, err := pki.ParseToken(cfg.Token)
	if err != nil {
		return nil, nil, fmt.Errorf("--token: %w", err)
	}
	if err := cfg.Machine.validate(); err != nil {
		return nil, nil, err
	}
	if len(cfg.Managers) == 0 {
		return nil, nil, errors.New("at least one --manager IP:PORT is required")
	}
	for _, m := range cfg.Managers {
		if _, _, err := net.SplitHostPort(m); err != nil {
			return nil, nil, fmt.Errorf("--manager %s: want IP:PORT", spec.QuoteShort(m))
		}
	}
	if err := checkPortsFree(cfg.Address); err != nil {
		return nil, nil, err
	}
	key, err := loadOrNewKey(dir)
	if err != nil {
		return nil, nil, err
	}
	pubDER, err := pkixPublicKey(key)
	if err != nil {
		return nil, nil, err
	}
	req := &pb.RegisterRequest{
		Token: cfg.Token, PublicKey: pubDER, Name: cfg.Name, Address: cfg.Address,
		Availability: cfg.Availability, Version: cfg.Version,
		Group: cfg.Machine.Group, InstanceId: cfg.Machine.InstanceID,
		ConfigSha: cfg.Machine.ConfigSHA, Labels: cfg.Machine.Labels,
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	reg, err := Register(ctx, tok, cfg.Managers, req, key)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			reg.Conn.Close()
		}
	}()
	cert, ca := reg.Cert, reg.CA
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	if err := pki.WriteFiles(dir, nodeCertName, cert, key); err != nil {
		return nil, nil, err
	}
	if err := atomicfile.Write(filepath.Join(dir, caCertFile), pki.EncodeCert(ca), 0o644); err != nil {
		return nil, nil, err
	}
	if err := saveManagers(dir, reg.Managers); err != nil {
		return nil, nil, err
	}
	st := &State{NodeID: reg.NodeID, ClusterID: reg.ClusterID, Address: cfg.Address, Name: cfg.Name}
	if err := writeJSON(filepath.Join(dir, stateFile), st); err != nil {
		return nil, nil, err
	}
	return st, reg.Conn, nil
}

// Registration is what the cluster hands a node that joined.
type Registration struct {
	NodeID, ClusterID string
	// Cert is the node's certificate; CA the cluster's, which the token
	// pins (checked).
	Cert, CA *x509.Certificate
	// Managers are the managers' addresses (those the join asked, if the
	// cluster named none).
	Managers []string
	// Conn, if not nil, is the join's connection, which the manager took
	// for the node's (the Register proved the node's key on it): the
	// node's first session may run on it (SessionConfig.First) without
	// a handshake of its own. Whoever holds the Registration closes it.
	Conn *JoinConn
}

// JoinConn is a join's connection to a manager, bound to the node that
// joined (pki/binding.go): it calls as the node until the node's
// certificate expires, and is never dialled again once lost.
type JoinConn struct {
	// Manager is the address dialled.
	Manager string
	conn    *grpc.ClientConn
}

// Close closes the connection; a nil JoinConn is closed already.
func (j *JoinConn) Close() {
	if j != nil {
		j.conn.Close()
	}
}

// Register registers the node of req with the cluster through managers,
// as `curator agent join` does, and checks what it is handed: the CA
// against the token's fingerprint, the node ID against the node's key.
// It retries as register says until ctx ends. curator-bench joins its
// simulated nodes with it.
//
// With key, the private key of req's public key, the Register proves it
// on its connection and asks to keep the connection for the node's first
// session (Registration.Conn, when the manager agreed).
func Register(ctx context.Context, tok pki.Token, managers []string, req *pb.RegisterRequest, key crypto.Signer) (*Registration, error) {
	pub, err := x509.ParsePKIXPublicKey(req.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("the node's public key: %w", err)
	}
	id, err := pki.NodeID(pub)
	if err != nil {
		return nil, err
	}
	resp, jc, err := register(ctx, tok, managers, req, key)
	if err != nil {
		return nil, err
	}
	reg, err := registration(tok, id, managers, resp)
	if err != nil {
		jc.Close()
		return nil, err
	}
	reg.Conn = jc
	return reg, nil
}

// registration checks resp, the answer to the Register of node id.
func registration(tok pki.Token, id string, managers []string, resp *pb.RegisterResponse) (*Registration, error) {
	if resp.NodeId != id {
		return nil, fmt.Errorf("the cluster names the node %s, its key makes it %s", spec.QuoteShort(resp.NodeId), id)
	}
	cert, err := pki.DecodeCert(resp.NodeCert)
	if err != nil {
		return nil, fmt.Errorf("certificate from the cluster: %w", err)
	}
	ca, err := pki.DecodeCert(resp.CaCert)
	if err != nil {
		return nil, fmt.Errorf("CA from the cluster: %w", err)
	}
	if err := tok.VerifyCA(ca); err != nil {
		return nil, err
	}
	mgrs := resp.Managers
	if len(mgrs) == 0 {
		mgrs = managers
	}
	return &Registration{NodeID: id, ClusterID: resp.ClusterId, Cert: cert, CA: ca, Managers: slices.Clone(mgrs)}, nil
}

// register tries each manager in turn until one answers. Unavailable
// managers (down, or no leader elected yet) are retried until ctx ends, as
// is a machine's address still named by a stale record (a provider's
// machine, see spec.ErrAddressHeld); a refusal (bad token, name taken)
// is final.
func register(ctx context.Context, tok pki.Token, managers []string, req *pb.RegisterRequest, key crypto.Signer) (*pb.RegisterResponse, *JoinConn, error) {
	var lastErr, held error
	for attempt := 0; ; attempt++ {
		for _, m := range managers {
			resp, jc, err := registerWith(ctx, tok, m, req, key)
			if err == nil {
				return resp, jc, nil
			}
			if addressHeld(err) {
				held = fmt.Errorf("join refused by %s: %s", m, status.Convert(err).Message())
				break // the leader answered: wait, then ask again
			}
			switch status.Code(err) {
			case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
				lastErr = fmt.Errorf("manager %s: %w", m, err)
				continue
			}
			return nil, nil, fmt.Errorf("join refused by %s: %s", m, status.Convert(err).Message())
		}
		select {
		case <-ctx.Done():
			if held != nil {
				return nil, nil, fmt.Errorf("could not join in time: %w", held)
			}
			return nil, nil, fmt.Errorf("could not join: no manager answered in time (last error: %v)", lastErr)
		case <-time.After(registerDelay(attempt, retryHint(lastErr), rand.Float64())):
		}
	}
}

// registerDelay is the wait before the next round of a join's attempts:
// what a manager asked for (its RetryInfo), or 200 ms more for each round
// up to a second, each spread over half again at random (u uniform in
// [0, 1)), so the machines of a group made at once do not ask in step.
func registerDelay(attempt int, hint time.Duration, u float64) time.Duration {
	d := registerBackoff.Wait(attempt)
	if hint > 0 {
		d = min(hint, 5*time.Second)
	}
	return d + time.Duration(min(max(u, 0), 1)*float64(d/2))
}

// registerBackoff is the wait between rounds of a join's attempts, before
// a manager's word and the spread.
var registerBackoff = backoff.Policy{Initial: 200 * time.Millisecond, Step: 200 * time.Millisecond, Max: time.Second}

// addressHeld says whether err is the cluster's answer that the joiner's
// address is still named by a stale node record.
func addressHeld(err error) bool {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Domain == spec.ErrorDomain && info.Reason == spec.AddressHeldReason {
			return true
		}
	}
	return false
}

// registerWith asks manager to register the node of req. With key, it
// proves the key on the connection first, and returns the connection if
// the manager took it for the node's.
func registerWith(ctx context.Context, tok pki.Token, manager string, req *pb.RegisterRequest, key crypto.Signer) (*pb.RegisterResponse, *JoinConn, error) {
	var untrusted atomic.Pointer[error]
	creds := transport.Capture(credentials.NewTLS(pinnedTLS(tok, &untrusted)))
	conn, err := grpc.NewClient(manager, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, nil, err
	}
	kept := false
	defer func() {
		if !kept {
			conn.Close()
		}
	}()
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	proved := req
	if key != nil {
		if proof := proveKey(actx, conn, creds, manager, req.PublicKey, key); proof != nil {
			proved = proto.CloneOf(req)
			proved.ConnectionProof = proof
		}
	}
	resp, err := pb.NewCuratorClient(conn).Register(actx, proved, grpc.WaitForReady(false))
	if e := untrusted.Load(); e != nil {
		// Not a manager being down: a server we must not trust. Final.
		return nil, nil, status.Error(codes.PermissionDenied, (*e).Error())
	}
	if err != nil {
		return nil, nil, err
	}
	if len(proved.ConnectionProof) == 0 || !resp.ConnectionBound {
		return resp, nil, nil
	}
	// The connection calls as the node now: should it drop, gRPC must
	// not dial one that does not in its place.
	creds.Seal()
	kept = true
	return resp, &JoinConn{Manager: manager, conn: conn}, nil
}

// proveKey connects conn and signs its keying material with key
// (pki.BindingMaterial), if the manager's certificate names the address
// dialled, as a session's connection checks (the Register's own check,
// the CA the token pins, does not look at names). Nil if it could not:
// the join goes on without.
func proveKey(ctx context.Context, conn *grpc.ClientConn, creds *transport.Captured, manager string, pubDER []byte, key crypto.Signer) []byte {
	host, _, err := net.SplitHostPort(manager)
	if err != nil {
		return nil
	}
	conn.Connect()
	for st := conn.GetState(); st != connectivity.Ready; st = conn.GetState() {
		if st == connectivity.TransientFailure || st == connectivity.Shutdown || !conn.WaitForStateChange(ctx, st) {
			return nil
		}
	}
	cs := creds.State()
	if cs == nil || len(cs.PeerCertificates) == 0 || cs.PeerCertificates[0].VerifyHostname(host) != nil {
		return nil
	}
	material, err := pki.BindingMaterial(cs, pubDER)
	if err != nil {
		return nil
	}
	proof, err := pki.SignBinding(key, material)
	if err != nil {
		return nil
	}
	return proof
}

// pinnedTLS trusts a server whose chain includes a CA with the token's
// fingerprint and whose certificate that CA signed. The joining node has
// no CA yet: the token's fingerprint is its trust anchor.
// A failed check is also stored in untrusted, as gRPC reports it as a
// transient connection error.
func pinnedTLS(tok pki.Token, untrusted *atomic.Pointer[error]) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		InsecureSkipVerify: true, // verified below against the pinned CA
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			err := verifyPinned(tok, raw)
			if err != nil {
				untrusted.Store(&err)
			}
			return err
		},
	}
}

func verifyPinned(tok pki.Token, raw [][]byte) error {
	var certs []*x509.Certificate
	for _, r := range raw {
		c, err := x509.ParseCertificate(r)
		if err != nil {
			return err
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return errors.New("server sent no certificate")
	}
	for _, c := range certs[1:] {
		if c.IsCA && tok.VerifyCA(c) == nil {
			pool := x509.NewCertPool()
			pool.AddCert(c)
			if _, err := certs[0].Verify(x509.VerifyOptions{Roots: pool}); err != nil {
				return fmt.Errorf("the server's certificate is not from the cluster's CA: %w", err)
			}
			return nil
		}
	}
	return fmt.Errorf("the server's CA is not the one the token names (fingerprint %s): wrong token or wrong cluster", tok.CAFingerprint)
}

// loadOrNewKey returns the key a join that registered but did not finish
// left in dir, or a new key, which it does not write.
func loadOrNewKey(dir string) (crypto.Signer, error) {
	path := pki.KeyPath(dir, nodeCertName)
	if data, err := os.ReadFile(path); err == nil {
		return pki.DecodeKey(data)
	}
	return pki.NewKey()
}

func pkixPublicKey(key crypto.Signer) ([]byte, error) {
	return x509.MarshalPKIXPublicKey(key.Public())
}
