package e2e

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// etcdCredential is a consensus member's etcd certificate, key and CA, as
// its data dir holds them.
type etcdCredential struct {
	cert tls.Certificate
	ca   []byte
}

// readEtcdCredential copies the etcd credential out of a consensus
// member's data dir (consensus.json and node.key).
func readEtcdCredential(t *testing.T, dataDir string) etcdCredential {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dataDir, "consensus.json"))
	if err != nil {
		t.Fatal(err)
	}
	join := &pb.ConsensusJoin{}
	if err := protojson.Unmarshal(data, join); err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dataDir, "node.key"))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(join.EtcdCert, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return etcdCredential{cert: cert, ca: join.EtcdCa}
}

// etcdGet reads a key from the etcd at endpoint with cred.
func etcdGet(cred etcdCredential, endpoint string) error {
	ca, err := pki.DecodeCert(cred.ca)
	if err != nil {
		return err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 2 * time.Second,
		TLS:         pki.ClientTLS(cred.cert, ca),
	})
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = cli.Get(ctx, "/curator/cluster")
	return err
}
