package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/curatorproject/curator/pki/pkitest"
)

// TestCapturedKeepsStateAndSeals: the credentials keep the state of the
// handshake they made (its keying material the server's own), and once
// sealed make no connection at all.
func TestCapturedKeepsStateAndSeals(t *testing.T) {
	tt := pkitest.New(t)
	server := tt.Server.Clone()
	server.NextProtos = []string{"h2"} // gRPC's clients insist on it
	l, err := tls.Listen("tcp", "127.0.0.1:0", server)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	served := make(chan tls.ConnectionState, 2)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if err := c.(*tls.Conn).Handshake(); err == nil {
				served <- c.(*tls.Conn).ConnectionState()
			}
			defer c.Close()
		}
	}()
	creds := Capture(credentials.NewTLS(tt.Client))
	if creds.State() != nil {
		t.Fatal("a state before any handshake")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dial := func() (net.Conn, error) {
		raw, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conn, _, err := creds.ClientHandshake(ctx, l.Addr().String(), raw)
		return conn, err
	}
	conn, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st := creds.State()
	if st == nil || !st.HandshakeComplete {
		t.Fatalf("no completed handshake kept: %+v", st)
	}
	srv := <-served
	mine, err := st.ExportKeyingMaterial("EXPORTER-test", nil, 16)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := srv.ExportKeyingMaterial("EXPORTER-test", nil, 16)
	if err != nil {
		t.Fatal(err)
	}
	if string(mine) != string(theirs) {
		t.Error("the kept state's keying material is not the server's")
	}
	if creds.Clone() != credentials.TransportCredentials(creds) {
		t.Error("a clone does not share the kept state")
	}

	creds.Seal()
	if _, err := dial(); !errors.Is(err, ErrSealed) {
		t.Errorf("a handshake after Seal: %v, want ErrSealed", err)
	}
}
