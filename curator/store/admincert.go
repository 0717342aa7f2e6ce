package store

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	pb "github.com/curatorproject/curator/proto"
)

// The admin certificates the cluster issued (`cluster admin-cert`): one
// record per certificate, by serial, holding its name, operator role,
// expiry and whether it was revoked (never its key, which the cluster
// never sees). A revoked certificate's record stays until it expires, so
// every manager, reading it on each management call (AdminCertRevoked),
// keeps refusing it. A serial the cluster did not issue (the certificate
// `agent init` wrote) may be revoked too: its record then holds the serial
// alone.

const adminCertPrefix = keyPrefix + "admin-certs/"

func adminCertKey(serial string) string { return adminCertPrefix + serial }

// AdminCertSave writes a record, fenced.
func AdminCertSave(ctx context.Context, l *Fence, c *pb.AdminCertificate) error {
	data, err := proto.Marshal(c)
	if err != nil {
		return err
	}
	if _, err := l.txn(ctx, clientv3.OpPut(adminCertKey(c.Serial), string(data))); err != nil {
		return fmt.Errorf("save admin certificate %s: %w", c.Serial, err)
	}
	return nil
}

// AdminCertList reads every record, by serial.
func AdminCertList(ctx context.Context, kv clientv3.KV) ([]*pb.AdminCertificate, error) {
	resp, err := kv.Get(ctx, adminCertPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("list admin certificates: %w", err)
	}
	out := make([]*pb.AdminCertificate, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		c := &pb.AdminCertificate{}
		if err := proto.Unmarshal(kv.Value, c); err != nil {
			return nil, fmt.Errorf("admin certificate %s is corrupt: %w", kv.Key, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// AdminCertListAt reads every record from the local etcd member
// (serializable), with the revision it read at, to watch from the next
// (AdminCertWatch).
func AdminCertListAt(ctx context.Context, kv clientv3.KV) ([]*pb.AdminCertificate, int64, error) {
	resp, err := kv.Get(ctx, adminCertPrefix, clientv3.WithPrefix(), clientv3.WithSerializable())
	if err != nil {
		return nil, 0, fmt.Errorf("list admin certificates: %w", err)
	}
	out := make([]*pb.AdminCertificate, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		c, err := AdminCertDecode(kv.Value)
		if err != nil {
			// A record we cannot read stands for a revoked one.
			c = &pb.AdminCertificate{Serial: AdminCertSerial(kv.Key), Revoked: true}
		}
		out = append(out, c)
	}
	return out, resp.Header.Revision, nil
}

// AdminCertWatch watches the records from revision from on. etcd serves a
// watch from the member it is made to, whether or not it has a leader.
func AdminCertWatch(ctx context.Context, w clientv3.Watcher, from int64) clientv3.WatchChan {
	return w.Watch(ctx, adminCertPrefix, clientv3.WithPrefix(), clientv3.WithRev(from))
}

// AdminCertSerial is the serial of a record's key.
func AdminCertSerial(key []byte) string { return strings.TrimPrefix(string(key), adminCertPrefix) }

// AdminCertDecode reads a record's value.
func AdminCertDecode(value []byte) (*pb.AdminCertificate, error) {
	c := &pb.AdminCertificate{}
	if err := proto.Unmarshal(value, c); err != nil {
		return nil, fmt.Errorf("admin certificate record is corrupt: %w", err)
	}
	return c, nil
}

// AdminCertRevoked says whether the certificate of serial was revoked. It
// reads the local etcd member's copy (serializable): a manager answers
// for itself, without the leader, a moment after the revocation is
// committed, and a manager cut off from the quorum serves no management
// call anyway.
func AdminCertRevoked(ctx context.Context, kv clientv3.KV, serial string) (bool, error) {
	resp, err := kv.Get(ctx, adminCertKey(serial), clientv3.WithSerializable())
	if err != nil {
		return false, fmt.Errorf("look up admin certificate %s: %w", serial, err)
	}
	if len(resp.Kvs) == 0 {
		return false, nil
	}
	c := &pb.AdminCertificate{}
	if err := proto.Unmarshal(resp.Kvs[0].Value, c); err != nil {
		// A record we cannot read: refuse rather than let a revoked
		// certificate through.
		return true, fmt.Errorf("admin certificate %s is corrupt: %w", serial, err)
	}
	return c.Revoked, nil
}
