package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// Disaster recovery (docs/architecture.md, "Disaster recovery"): a
// manager's etcd restarted as the only member of its cluster, from its own
// data (`agent run --force-new-cluster`) or from a backup (`agent
// restore`). Before its curator starts, Recover puts the records in order;
// the loops do the rest, as after any change of membership: the consensus
// sync clears the role of every node whose member is gone, the health loop
// marks them down, and the groups or the reaper replace them.

// RecoverParams says how the cluster was recovered.
type RecoverParams struct {
	// NodeID is the node whose etcd is now the only member.
	NodeID string
	// Self, for a restore, is that node's new record (a fresh identity at
	// the address it was restored at); nil for a forced new cluster, where
	// the node keeps its record.
	Self *pb.Node
	// How is said in the event and in the refusal of the old managers:
	// "a forced new cluster" or "a restore from a backup".
	How string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Recover writes, in one transaction and unfenced (no curator runs yet,
// and this etcd is the only member):
//
//   - for a restore, the restored node's record; a record of another node
//     at its address goes (the machine it names is the one restored on);
//   - on every other node that held the consensus role, the refusal its
//     agent will get from the node API: its etcd data is of the cluster
//     before the recovery and must never serve again (a forced new cluster
//     keeps etcd's cluster ID, so without the refusal the node would be
//     taken back as a worker by the consensus sync, its old data wiped
//     silently; an operator should know, and join it again on purpose);
//   - no election keys: those of curators that cannot reach this etcd any
//     more would hold the next leader back until their leases expire, and
//     a restore refreshes every lease's TTL;
//   - an event that says what happened.
//
// It is idempotent: a recovery cut short is finished by running it again.
//
// It refuses, and writes nothing, unless etcd's only member is NodeID's:
// with another member there, other curators may be running, and deleting
// their election keys unfenced would depose a live leader. For a forced
// new cluster, NodeID must have a record (the cluster's records are this
// node's own data); for a restore, Self must be NodeID's.
func Recover(ctx context.Context, cli *clientv3.Client, p RecoverParams) error {
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	if p.NodeID == "" {
		return fmt.Errorf("recover: %w: no node ID", spec.ErrInvalid)
	}
	if p.Self != nil && p.Self.Id != p.NodeID {
		return fmt.Errorf("recover: %w: the restored record is node %s's, not node %s's", spec.ErrInvalid, p.Self.Id, p.NodeID)
	}
	nodes, err := NodeList(ctx, cli)
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	members, err := cli.MemberList(ctx)
	if err != nil {
		return fmt.Errorf("recover: list etcd members: %w", err)
	}
	var memberNames []string
	for _, m := range members.Members {
		memberNames = append(memberNames, m.Name)
	}
	if !slices.Equal(memberNames, []string{p.NodeID}) {
		return fmt.Errorf("recover: %w: etcd's members are %q, not node %s alone: a recovery is only for an etcd restarted as the only member of its cluster", spec.ErrPrecondition, memberNames, p.NodeID)
	}
	if p.Self == nil && !slices.ContainsFunc(nodes, func(n *pb.Node) bool { return n.Id == p.NodeID }) {
		return fmt.Errorf("recover: %w: node %s has no record in etcd's data: it is not a node of this cluster", spec.ErrPrecondition, p.NodeID)
	}
	ts := timestamppb.New(now())
	var ops []clientv3.Op
	put := func(n *pb.Node) error {
		data, err := proto.Marshal(n)
		if err != nil {
			return err
		}
		ops = append(ops, clientv3.OpPut(nodeKey(n.Id), string(data)))
		return nil
	}
	if p.Self != nil {
		self := CloneNode(p.Self)
		self.State = pb.NodeState_NODE_STATE_UP
		self.Status = pb.NodeStatus_NODE_STATUS_UNKNOWN
		self.Created, self.Updated, self.StatusChanged = ts, ts, ts
		if self.Labels == nil {
			self.Labels = map[string]string{}
		}
		if err := put(self); err != nil {
			return err
		}
	}
	var refused []string
	for _, n := range nodes {
		switch {
		case n.Id == p.NodeID:
		case p.Self != nil && n.Address == p.Self.Address:
			ops = append(ops, clientv3.OpDelete(nodeKey(n.Id)))
		case spec.HasRole(n, pb.Role_ROLE_CONSENSUS) && !slices.Contains(memberNames, n.Id):
			n = CloneNode(n)
			n.Refused = RefusedAfterRecovery(n.Id, p.How, now())
			n.Updated = ts
			if err := put(n); err != nil {
				return err
			}
			refused = append(refused, n.Id)
		}
	}
	// A restore brings back the records of another time: its groups'
	// machines, as their providers list them now, may be another world's
	// (the old cluster's dir, a dev cluster long gone). Every group comes
	// back suspended, so the restored leader makes and destroys nothing
	// until an operator resumes them (`curator group resume --all`). A
	// forced new cluster keeps its own machines and its groups run on:
	// they replace what the recovery left behind (the refused managers),
	// within their repair ceilings.
	var suspended []string
	if p.Self != nil {
		groups, err := GroupList(ctx, cli)
		if err != nil {
			return fmt.Errorf("recover: %w", err)
		}
		for _, g := range groups {
			if g.Suspended == "" {
				g.Suspended = fmt.Sprintf("restored by %s at %s", p.How, ts.AsTime().UTC().Format(time.RFC3339))
			}
			data, err := proto.Marshal(g)
			if err != nil {
				return err
			}
			ops = append(ops, clientv3.OpPut(groupKey(g.Spec.GetName()), string(data)))
			suspended = append(suspended, g.Spec.GetName())
		}
	}
	ops = append(ops, clientv3.OpDelete(electionPrefix+"/", clientv3.WithPrefix()))
	why := fmt.Sprintf("the cluster was recovered by %s on this node; the managers that were not there are refused until they are wiped and join again: %v", p.How, refused)
	if len(suspended) > 0 {
		why += fmt.Sprintf("; its groups are suspended (the leader makes and destroys none of their machines) until `curator group resume --all`: %v", suspended)
	}
	ev := &pb.Event{
		Time: ts, Loop: "recovery", NodeId: p.NodeID, Action: "recover", Leader: p.NodeID,
		Reason: why,
	}
	data, err := proto.Marshal(ev)
	if err != nil {
		return err
	}
	ops = append(ops, clientv3.OpPut(eventKey(ev), string(data)))
	if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		return fmt.Errorf("recover: write the records: %w", err)
	}
	return nil
}

// RefusedAfterRecovery is what the node API tells an old manager.
func RefusedAfterRecovery(id, how string, at time.Time) string {
	return fmt.Sprintf("node %s was a manager when the cluster was recovered without it (%s, %s), so its etcd data belongs to the cluster as it was before and must never run again: stop its agent, wipe its data dir (`curator agent leave --force --data-dir DIR` while the agent runs, or delete DIR) and join it again with `curator agent join`",
		id, how, at.UTC().Format(time.RFC3339))
}

// RecordPrefix is the prefix of every key the curator keeps in etcd: what
// a restore reads from a backup.
const RecordPrefix = keyPrefix

// BackupContents is what a restore needs from a backup's records.
type BackupContents struct {
	ClusterID                 string
	CA, EtcdCA                *pki.CA
	EtcdCRL                   []byte
	WorkerToken, ManagerToken string
	// Nodes is how many node records the backup holds.
	Nodes int
	// CertTTL is the cluster's cert_ttl: how long the restored node's
	// certificates last.
	CertTTL time.Duration
}

// ReadBackup reads the cluster's records from a backup's keys (the latest
// value of each key under RecordPrefix). A backup of something else is
// refused.
func ReadBackup(keys map[string][]byte) (*BackupContents, error) {
	csData, ok := keys[clusterKey]
	if !ok {
		return nil, errors.New("the backup holds no curator cluster record: is it a backup of a curator cluster?")
	}
	cs := &pb.ClusterState{}
	if err := proto.Unmarshal(csData, cs); err != nil {
		return nil, fmt.Errorf("the backup's cluster record is corrupt: %w", err)
	}
	st := &pb.PKIState{}
	if err := proto.Unmarshal(keys[pkiKey], st); err != nil || len(st.CaKey) == 0 {
		return nil, fmt.Errorf("the backup's CA record is missing or corrupt (%v)", err)
	}
	ca, err := CAFromPEM(st.CaCert, st.CaKey)
	if err != nil {
		return nil, fmt.Errorf("the backup's cluster CA: %w", err)
	}
	etcdCA, err := CAFromPEM(st.EtcdCaCert, st.EtcdCaKey)
	if err != nil {
		return nil, fmt.Errorf("the backup's etcd CA: %w", err)
	}
	out := &BackupContents{ClusterID: cs.ClusterId, CA: ca, EtcdCA: etcdCA, EtcdCRL: keys[EtcdCRLKey], CertTTL: spec.CertTTL(cs)}
	fp := pki.Fingerprint(ca.Cert)
	out.WorkerToken = pki.Token{CAFingerprint: fp, Secret: cs.WorkerTokenSecret}.String()
	out.ManagerToken = pki.Token{CAFingerprint: fp, Secret: cs.ManagerTokenSecret}.String()
	for k := range keys {
		if len(k) > len(nodePrefix) && k[:len(nodePrefix)] == nodePrefix {
			out.Nodes++
		}
	}
	return out, nil
}

// ErrNoSnapshot: the leader's etcd could not make a snapshot.
var ErrNoSnapshot = errors.New("etcd could not make a snapshot")
