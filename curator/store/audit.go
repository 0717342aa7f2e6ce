package store

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	pb "github.com/curatorproject/curator/proto"
)

// The audit trail: every management call that changed something or
// revealed a secret, and every refused one (see audited). Keys sort by
// time; the trail is bounded, apart from the events, by trimming the
// oldest once it grows a tenth past MaxAudit. It is under keyPrefix, so a
// backup carries it.

const auditPrefix = keyPrefix + "audit/"

// MaxAudit is how many audit entries are kept.
const MaxAudit = 2000

func auditKey(e *pb.AuditEntry) string { return timeKey(auditPrefix, e.Time.AsTime()) }

// AuditRecord writes an entry and trims the trail: fenced when l is a
// Fence, as the leader records what it served; with a plain put
// otherwise, for a call a follower refused before forwarding it (a new
// key, never a change to one, which no leader could write for it).
func AuditRecord(ctx context.Context, kv clientv3.KV, l *Fence, e *pb.AuditEntry) error {
	return logAppend(ctx, kv, l, auditPrefix, auditKey(e), e, MaxAudit, "audit entry")
}

// AuditList reads the newest limit entries (0: all kept) recorded after
// revision after (0: any), oldest first, and the revision it read at.
func AuditList(ctx context.Context, kv clientv3.KV, limit int64, after int64) ([]*pb.AuditEntry, int64, error) {
	return logNewest(ctx, kv, auditPrefix, limit, after, func() *pb.AuditEntry { return &pb.AuditEntry{} }, "audit entry")
}
