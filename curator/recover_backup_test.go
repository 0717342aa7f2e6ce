package curator

import (
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/curatorproject/curator/consensus"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/pki"
)

// TestReadBackup reads the records of a real backup (a snapshot of the
// test cluster's etcd, as `curator cluster backup` takes it) the way
// `agent restore` does: the file is restored as a new etcd data dir
// (consensus.RestoreSnapshot checks its checksum first), and ReadBackup
// reads the cluster from its keys. A file that is truncated, has a byte
// flipped or is empty is refused before anything is written; keys that
// are not a curator cluster's are refused with what is wrong.
func TestReadBackup(t *testing.T) {
	c := newTestCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	seedLostCluster(t, ctx, c) // four node records in all
	rc, err := c.cli.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	good, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	fp := pki.Fingerprint(c.root.Cert)

	for _, tc := range []struct {
		name string
		// file makes the backup file from the good one; keys changes
		// the keys read from it before ReadBackup reads them.
		file func(b []byte) []byte
		keys func(k map[string][]byte)
		// badFile: the file is refused (consensus.ErrBadSnapshot) and
		// no data dir is made; wantErr: ReadBackup refuses, saying so.
		badFile bool
		wantErr string
	}{
		{name: "good"},
		{name: "truncated", file: func(b []byte) []byte { return b[:len(b)-4096] }, badFile: true},
		{name: "truncated by a byte", file: func(b []byte) []byte { return b[:len(b)-1] }, badFile: true},
		{name: "a byte flipped", file: func(b []byte) []byte {
			b = slices.Clone(b)
			b[len(b)/2] ^= 0xff
			return b
		}, badFile: true},
		{name: "empty", file: func([]byte) []byte { return nil }, badFile: true},
		{name: "not a curator cluster", keys: func(k map[string][]byte) { clear(k) }, wantErr: "no curator cluster record"},
		{name: "cluster record corrupt", keys: func(k map[string][]byte) { k[store.Keys.Cluster()] = []byte{0xff, 0xff, 0xff} }, wantErr: "cluster record is corrupt"},
		{name: "CA record missing", keys: func(k map[string][]byte) { delete(k, store.Keys.PKI()) }, wantErr: "CA record is missing or corrupt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := good
			if tc.file != nil {
				data = tc.file(good)
			}
			dir := t.TempDir()
			path := filepath.Join(dir, "backup.db")
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			etcdDir := filepath.Join(dir, "etcd")
			restored, err := consensus.RestoreSnapshot(path, etcdDir, c.first.id, "127.0.0.1", 7000, store.RecordPrefix, nopLogger())
			if tc.badFile {
				if !errors.Is(err, consensus.ErrBadSnapshot) {
					t.Errorf("RestoreSnapshot: %v, want %v", err, consensus.ErrBadSnapshot)
				}
				if _, err := os.Stat(etcdDir); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("a refused backup left %s: %v", etcdDir, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("RestoreSnapshot: %v", err)
			}
			if restored.MemberID == 0 || restored.ClusterID == 0 {
				t.Errorf("restored member %x of cluster %x, want new IDs", restored.MemberID, restored.ClusterID)
			}
			keys := maps.Clone(restored.Keys)
			if tc.keys != nil {
				tc.keys(keys)
			}
			got, err := store.ReadBackup(keys)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ReadBackup: %v, want an error that says %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadBackup: %v", err)
			}
			if got.ClusterID != "test" || got.Nodes != 4 {
				t.Errorf("cluster %q with %d node records, want test with 4", got.ClusterID, got.Nodes)
			}
			if !got.CA.Cert.Equal(c.root.Cert) || !got.EtcdCA.Cert.Equal(c.etcdCA.Cert) {
				t.Error("the backup's CAs are not the cluster's")
			}
			if got.CA.Key == nil || got.EtcdCA.Key == nil {
				t.Error("the backup's CAs have no keys: a restore could issue no certificate")
			}
			for _, tok := range []string{got.WorkerToken, got.ManagerToken} {
				parsed, err := pki.ParseToken(tok)
				if err != nil || parsed.CAFingerprint != fp {
					t.Errorf("token %q (%v): want one of the cluster's CA, %s", tok, err, fp)
				}
			}
			if got.WorkerToken == got.ManagerToken {
				t.Error("the worker and manager tokens are the same")
			}
		})
	}
}
