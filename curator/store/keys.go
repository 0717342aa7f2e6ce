package store

import (
	"fmt"
	"sync/atomic"
	"time"

	pb "github.com/curatorproject/curator/proto"
)

// The key layout in etcd. The prefixes are unexported: nothing outside
// this package builds a key, and every write goes through the Fence.
const (
	keyPrefix      = "/curator/"
	nodePrefix     = keyPrefix + "nodes/"
	clusterKey     = keyPrefix + "cluster"
	pkiKey         = keyPrefix + "pki"
	electionPrefix = keyPrefix + "election"
	// promotionPrefix holds the promotions an approval owes: one key per
	// approved node that joined with the manager token.
	promotionPrefix = keyPrefix + "promotions/"
	// groupPrefix holds the groups: one key per group, by name.
	groupPrefix = keyPrefix + "groups/"
	// rolloutPrefix holds each group's rollout: the target config SHA,
	// its state and progress.
	rolloutPrefix = keyPrefix + "rollouts/"
	// upgradeKey holds the last upgrade of the cluster to a release.
	upgradeKey = keyPrefix + "upgrade"
)

func nodeKey(id string) string { return nodePrefix + id }

func promotionKey(id string) string { return promotionPrefix + id }

func groupKey(name string) string { return groupPrefix + name }

func rolloutKey(group string) string { return rolloutPrefix + group }

// keySeq tells apart records keyed by time (events, audit entries) made
// in the same nanosecond (or with a coarse clock).
var keySeq atomic.Uint64

// timeKey is the key under prefix of a record made at t: keys sort by
// time first.
func timeKey(prefix string, t time.Time) string {
	return fmt.Sprintf("%s%020d-%012d", prefix, t.UnixNano(), keySeq.Add(1))
}

// Keys gives tests and tools that must reach past the verbs (a record
// written half-way, a key deleted by hand, a backup read raw) the keys as
// this package builds them, so that they need not copy the layout. The
// leader's own code never uses it: it reads and writes through the verbs.
var Keys keys

type keys struct{}

func (keys) Node(id string) string          { return nodeKey(id) }
func (keys) Nodes() string                  { return nodePrefix }
func (keys) Group(name string) string       { return groupKey(name) }
func (keys) Rollout(group string) string    { return rolloutKey(group) }
func (keys) Cluster() string                { return clusterKey }
func (keys) Upgrade() string                { return upgradeKey }
func (keys) PKI() string                    { return pkiKey }
func (keys) Election() string               { return electionPrefix }
func (keys) Audit(e *pb.AuditEntry) string  { return auditKey(e) }
func (keys) Audits() string                 { return auditPrefix }
func (keys) AdminCert(serial string) string { return adminCertKey(serial) }
func (keys) AdminCerts() string             { return adminCertPrefix }
