package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/curatorproject/curator/consensus"
	"github.com/curatorproject/curator/curator"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

// consensusState is what the agent runs for the consensus role, for status.
type consensusState struct {
	mu      sync.Mutex
	etcd    *consensus.Service
	curator *curator.Service
}

func (c *consensusState) set(e *consensus.Service, cur *curator.Service) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.etcd, c.curator = e, cur
}

func (c *consensusState) get() (*consensus.Service, *curator.Service) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.etcd, c.curator
}

var errRoleChanged = errors.New("consensus role changed")

func hasConsensus(n *pb.Node) bool {
	for _, r := range n.GetRoles() {
		if r == pb.Role_ROLE_CONSENSUS {
			return n.Consensus != nil
		}
	}
	return false
}

// runRoles makes the node run what its record says. It is level-triggered:
// each run compares what is on disk (consensus.json) with the record last
// received and acts on the difference. A role that goes away ends the run
// with errRoleChanged, so that the supervisor stops etcd and the curator
// (the subtree) before the next run wipes etcd's data.
//
// Until the leader has said anything, the disk is the truth: a manager
// must restart etcd without asking anyone, for it may be the quorum every
// curator waits for.
func (a *Agent) runRoles(ctx context.Context) error {
	lg := supervisor.Logger(ctx)
	dir := a.cfg.DataDir
	join, err := loadConsensus(dir)
	if err != nil {
		return err
	}
	if desired, known, _ := a.desired.get(); join != nil && known && roleGone(join, desired) {
		lg.Info("consensus role removed: wiping etcd data", zap.String("node", a.state.NodeID))
		if err := a.wipeConsensus(); err != nil {
			return err
		}
		join = nil
	}
	start := func(j *pb.ConsensusJoin) error {
		return supervisor.Run(ctx, "consensus", func(ctx context.Context) error { return a.runConsensus(ctx, j) })
	}
	if join != nil {
		if err := start(join); err != nil {
			return err
		}
	}
	supervisor.Signal(ctx, supervisor.Healthy)
	for {
		desired, known, changed := a.desired.get()
		if known {
			switch {
			case join == nil && hasConsensus(desired):
				lg.Info("consensus role granted: starting etcd as a learner")
				join = proto.Clone(desired.Consensus).(*pb.ConsensusJoin)
				a.muConsensusFile.Lock()
				err := saveConsensus(dir, join)
				a.muConsensusFile.Unlock()
				if err != nil {
					return err
				}
				if err := start(join); err != nil {
					return err
				}
			case join != nil && roleGone(join, desired):
				return errRoleChanged
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// wipeConsensus deletes etcd's data and the role's files.
func (a *Agent) wipeConsensus() error {
	a.muConsensusFile.Lock()
	defer a.muConsensusFile.Unlock()
	dir := a.cfg.DataDir
	if err := os.RemoveAll(filepath.Join(dir, etcdDir)); err != nil {
		return err
	}
	for _, f := range []string{consensusFile, etcdCRLFile} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// roleGone says whether the record no longer gives this node the consensus
// role it runs: the role was taken, or taken and given again as another
// etcd member.
func roleGone(local *pb.ConsensusJoin, desired *pb.Node) bool {
	if !hasConsensus(desired) {
		return true
	}
	return local.MemberId != 0 && desired.Consensus.MemberId != 0 && local.MemberId != desired.Consensus.MemberId
}

// runConsensus runs etcd and, once this member votes, the curator beside
// it. On a clean stop the curator goes first, so that a leader resigns
// through its own etcd before etcd closes.
func (a *Agent) runConsensus(ctx context.Context, join *pb.ConsensusJoin) error {
	lg := supervisor.Logger(ctx)
	dir := a.cfg.DataDir
	ip, port, err := spec.SplitAddress(a.state.Address)
	if err != nil {
		return err
	}
	boot, err := loadBootstrap(dir)
	if err != nil {
		return err
	}
	restored, err := loadRestore(dir)
	if err != nil {
		return err
	}
	forced := a.forceNewCluster.Load()
	keyPEM, err := pki.EncodeKey(a.id.key)
	if err != nil {
		return err
	}
	// The etcd certificate may have been renewed since the role was
	// given: consensus.json holds the current one.
	a.muConsensusFile.Lock()
	onDisk, err := loadConsensus(dir)
	a.muConsensusFile.Unlock()
	if err != nil {
		return err
	}
	if onDisk != nil && len(onDisk.EtcdCert) > 0 && (onDisk.MemberId == join.MemberId || join.MemberId == 0) {
		join = proto.Clone(join).(*pb.ConsensusJoin)
		join.EtcdCert = onDisk.EtcdCert
	}
	crlPath := filepath.Join(dir, etcdCRLFile)
	etcdCA, err := pki.DecodeCert(join.EtcdCa)
	if err != nil {
		return fmt.Errorf("etcd CA: %w", err)
	}
	if err := updateCRL(crlPath, join.EtcdCrl, etcdCA); err != nil {
		return err
	}
	ecfg := consensus.Config{
		NodeID: a.state.NodeID, DataDir: filepath.Join(dir, etcdDir),
		ListenIP: ip.String(), Port: port,
		CertPEM: join.EtcdCert, KeyPEM: keyPEM, CAPEM: join.EtcdCa,
		Logger: a.cfg.Logger.Named("consensus"),
		TickMs: a.cfg.EtcdTickMs, ElectionMs: a.cfg.EtcdElectionMs,
		ForceNewCluster: forced,
	}
	if _, err := os.Stat(crlPath); err == nil {
		ecfg.CRLFile = crlPath
	} else {
		lg.Warn("no etcd revocation list: etcd certificates of demoted nodes are not refused until the leader sends one")
	}
	if boot != nil {
		ecfg.Mode = consensus.ModeBootstrap
	} else {
		ecfg.Mode = consensus.ModeJoin
		jp := &consensus.JoinParams{ClusterID: join.EtcdClusterId, MemberID: join.MemberId}
		for _, p := range join.Peers {
			jp.Peers = append(jp.Peers, consensus.Peer{NodeID: p.NodeId, PeerURL: p.PeerUrl})
		}
		ecfg.Join = jp
	}
	svc, err := consensus.New(ecfg)
	if err != nil {
		return err
	}
	etcdCtx, cancelEtcd := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelEtcd()
	etcdErr := make(chan error, 1)
	etcdEnded := make(chan struct{})
	go func() {
		etcdErr <- a.wipeIfNotOurs(lg, svc.Run(etcdCtx), join.MemberId)
		close(etcdEnded)
	}()
	a.consensus.set(svc, nil)
	defer a.consensus.set(nil, nil)

	// Wait until this member votes: a learner cannot hold a lease.
	if err := waitVoter(ctx, svc.Watch(), etcdEnded); err != nil {
		if !errors.Is(err, errEtcdEnded) {
			cancelEtcd()
			<-etcdErr
			return err
		}
		err := <-etcdErr
		if forced && errors.Is(err, consensus.ErrNotVoter) {
			a.fail(fmt.Errorf("--force-new-cluster: %w", err))
		}
		return fmt.Errorf("etcd: %w", err)
	}
	cli := svc.Client()
	if cli == nil {
		cancelEtcd()
		return fmt.Errorf("etcd: %w", <-etcdErr)
	}
	if boot != nil {
		if err := a.bootstrapRecords(ctx, svc, boot); err != nil {
			cancelEtcd()
			<-etcdErr
			return err
		}
		lg.Info("cluster records written: the cluster exists")
	}
	if forced || restored != nil {
		if err := a.recoverRecords(ctx, cli, restored); err != nil {
			cancelEtcd()
			<-etcdErr
			if errors.Is(err, spec.ErrInvalid) || errors.Is(err, spec.ErrPrecondition) {
				// Refused, not failed: another try would be refused again.
				a.fail(err)
			}
			return err
		}
	}
	ccfg := curator.Config{
		NodeID: a.state.NodeID, Address: a.state.Address, Etcd: cli,
		NodeCert: a.id.cert, NodeKey: a.id.key, CA: a.id.ca, Certs: a.id.certs,
		ElectionTTL: a.cfg.ElectionTTL, HeartbeatInterval: a.cfg.HeartbeatInterval, DownAfter: a.cfg.DownAfter,
		ReapAfter: a.cfg.ReapAfter,
		Version:   a.cfg.Version, Logger: a.cfg.Logger.Named("curator"), Metrics: a.metrics,
		// The membership loops look when this node's etcd member applies
		// a membership change, not at their next resync.
		MembershipChanges: svc.MembershipChanges,
	}
	if a.docker != nil {
		// Not a nil *Client in the interface: none means none.
		ccfg.Docker = a.docker
	}
	cur, err := curator.New(ccfg)
	if err != nil {
		cancelEtcd()
		<-etcdErr
		return err
	}
	a.consensus.set(svc, cur)
	var running supervisor.Running
	if err := supervisor.RunGroup(ctx, map[string]supervisor.Runnable{
		"curator": running.Wrap(cur.Run),
		"crl":     func(ctx context.Context) error { return followCRL(ctx, cli, crlPath, etcdCA) },
	}); err != nil {
		cancelEtcd()
		<-etcdErr
		return err
	}
	supervisor.Signal(ctx, supervisor.Healthy)
	select {
	case <-ctx.Done():
		running.Wait(3 * time.Second)
		cancelEtcd()
		<-etcdErr
		return ctx.Err()
	case err := <-etcdErr:
		return fmt.Errorf("etcd: %w", err)
	}
}

// errEtcdEnded: etcd's run ended before this member voted.
var errEtcdEnded = errors.New("etcd's run ended")

// waitVoter waits until the member w watches votes, or until etcd's run
// has ended (ended closed, its error sent) or ctx ends. The end is waited
// for as well as the status: a run sets its status Stopped as it returns,
// before what follows it (wiping a removed member's data) is done, so a
// wait on the status alone could see Stopped, find no error yet, and wait
// for a change that never comes.
func waitVoter(ctx context.Context, w *consensus.StatusWatcher, ended <-chan struct{}) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-ended:
			cancel()
		case <-wctx.Done():
		}
	}()
	for {
		st, err := w.Get(wctx)
		if err != nil {
			select {
			case <-ended:
				return errEtcdEnded
			default:
				return err
			}
		}
		if st.State == consensus.Voter {
			return nil
		}
	}
}

// wipeIfNotOurs passes err on, having wiped etcd's data when err says the
// data is of a removed member other than member, the one this node's
// record hands it: its etcd took the removed member's place when it joined
// (a peer whose view of the cluster was behind answered first, after a
// dead node's member at the same peer URL was removed and this one added),
// and would start as it again each time, for good. Wiped, the next run
// joins as member.
func (a *Agent) wipeIfNotOurs(lg *zap.Logger, err error, member uint64) error {
	var removed *consensus.RemovedError
	if member == 0 || !errors.As(err, &removed) || removed.MemberID == member {
		return err
	}
	lg.Warn("this node's etcd data is of a removed member, not of the one its record hands it: wiping it to join again",
		zap.String("data_member", fmt.Sprintf("%x", removed.MemberID)), zap.String("member", fmt.Sprintf("%x", member)))
	if werr := os.RemoveAll(filepath.Join(a.cfg.DataDir, etcdDir)); werr != nil {
		return fmt.Errorf("%w; wiping its data failed: %v", err, werr)
	}
	return fmt.Errorf("%w; its data was wiped, and the next run joins as member %x", err, member)
}

// bootstrapRecords writes the new cluster's records (first run after
// init), then forgets the CA keys kept on disk for it.
func (a *Agent) bootstrapRecords(ctx context.Context, svc *consensus.Service, boot *bootstrapRecord) error {
	st := &pb.PKIState{}
	if err := proto.Unmarshal(boot.PKI, st); err != nil {
		return fmt.Errorf("%s: %w", bootstrapFile, err)
	}
	first := &pb.Node{}
	if err := proto.Unmarshal(boot.Node, first); err != nil {
		return fmt.Errorf("%s: %w", bootstrapFile, err)
	}
	caCert, err := pki.DecodeCert(st.CaCert)
	if err != nil {
		return err
	}
	caKey, err := pki.DecodeKey(st.CaKey)
	if err != nil {
		return err
	}
	etcdCert, err := pki.DecodeCert(st.EtcdCaCert)
	if err != nil {
		return err
	}
	etcdKey, err := pki.DecodeKey(st.EtcdCaKey)
	if err != nil {
		return err
	}
	var toks [2]*pki.Token
	for i, s := range []string{boot.WorkerToken, boot.ManagerToken} {
		if s == "" {
			continue
		}
		t, err := pki.ParseToken(s)
		if err != nil {
			return fmt.Errorf("%s: %w", bootstrapFile, err)
		}
		toks[i] = &t
	}
	status := svc.Status()
	first.Consensus.MemberId = status.MemberID
	first.Consensus.EtcdClusterId = status.ClusterID
	if _, err := store.Bootstrap(ctx, svc.Client(), store.BootstrapParams{
		ClusterID:   boot.ClusterID,
		CA:          &pki.CA{Cert: caCert, Key: caKey},
		EtcdCA:      &pki.CA{Cert: etcdCert, Key: etcdKey},
		First:       first,
		WorkerToken: toks[0], ManagerToken: toks[1],
		CertTTL: boot.CertTTL,
	}); err != nil {
		return err
	}
	if err := saveConsensus(a.cfg.DataDir, first.Consensus); err != nil {
		return err
	}
	return os.Remove(filepath.Join(a.cfg.DataDir, bootstrapFile))
}

// recoverRecords puts the records in order after etcd came up as the only
// member of its cluster (store.Recover), before the curator starts:
// forced from this node's own data, or restored from a backup (restored
// holds the node's new record). Then it forgets what it was asked to do,
// so that a later start of etcd is an ordinary one.
func (a *Agent) recoverRecords(ctx context.Context, cli *clientv3.Client, restored *restoreRecord) error {
	p := store.RecoverParams{NodeID: a.state.NodeID, How: "a forced new cluster"}
	if restored != nil {
		self := &pb.Node{}
		if err := proto.Unmarshal(restored.Node, self); err != nil {
			return fmt.Errorf("%s: %w", restoreFile, err)
		}
		p.Self, p.How = self, "a restore from a backup"
	}
	if err := store.Recover(ctx, cli, p); err != nil {
		return err
	}
	a.forceNewCluster.Store(false)
	supervisor.Logger(ctx).Warn("the cluster was recovered: this node's etcd is its only member; the managers that were not there are refused until they are wiped and join again",
		zap.String("how", p.How))
	if restored != nil {
		return os.Remove(filepath.Join(a.cfg.DataDir, restoreFile))
	}
	return nil
}
