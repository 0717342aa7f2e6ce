package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// handOver answers ListNodes with err until answerAt, then with a node.
type handOver struct {
	pb.UnimplementedManagementServer
	err      error
	answerAt atomic.Pointer[time.Time]
}

func (h *handOver) ListNodes(ctx context.Context, _ *pb.ListNodesRequest) (*pb.ListNodesResponse, error) {
	if err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	if at := h.answerAt.Load(); at == nil || time.Now().Before(*at) {
		return nil, h.err
	}
	return &pb.ListNodesResponse{Nodes: []*pb.NodeView{{Node: &pb.Node{Id: "n"}}}}, nil
}

func (h *handOver) answerAfter(d time.Duration) {
	at := time.Now().Add(d)
	h.answerAt.Store(&at)
}

func reasonStatus(t *testing.T, code codes.Code, msg, reason string) error {
	t.Helper()
	st, err := status.New(code, msg).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: spec.ErrorDomain})
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

type notes struct {
	mu   sync.Mutex
	said []string
}

func (n *notes) note(msg string) { n.mu.Lock(); n.said = append(n.said, msg); n.mu.Unlock() }
func (n *notes) all() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.said...)
}

// A call during a leader hand-over (the managers say no leader is elected)
// waits it out with WithLeaderWait, saying so once, within its bound; a
// lost quorum is not waited for; without the option the call fails after
// its rounds, as before.
func TestLeaderWait(t *testing.T) {
	ca := newCA(t)
	noLeader := reasonStatus(t, codes.Unavailable, spec.ErrNoLeader.Error(), spec.NoLeaderReason)

	h := &handOver{err: noLeader}
	path := writeConfig(t, ca, startManager2(t, ca, "127.0.0.2", h))

	t.Run("without the option", func(t *testing.T) {
		h.answerAfter(time.Hour)
		if _, err := listNodeIDs(t, dial(t, path, WithCachePath(""))); !errors.Is(err, ErrNoManager) {
			t.Errorf("error = %v, want ErrNoManager", err)
		}
	})
	t.Run("a hand-over is waited out", func(t *testing.T) {
		h.answerAfter(3 * time.Second)
		var n notes
		ids, err := listNodeIDs(t, dial(t, path, WithCachePath(""), WithLeaderWait(15*time.Second, n.note)))
		if err != nil || len(ids) != 1 {
			t.Fatalf("ids %v, error %v; want the node once the leader is elected", ids, err)
		}
		if said := n.all(); len(said) != 1 || !strings.Contains(said[0], "waiting up to 15s") {
			t.Errorf("notes %q, want one that says it waits up to 15s", said)
		}
	})
	t.Run("within its bound", func(t *testing.T) {
		h.answerAfter(time.Hour)
		began := time.Now()
		_, err := listNodeIDs(t, dial(t, path, WithCachePath(""), WithLeaderWait(3*time.Second, nil)))
		if took := time.Since(began); !errors.Is(err, ErrNoManager) || took < 3*time.Second || took > 8*time.Second {
			t.Errorf("error %v after %s; want ErrNoManager after about 3s", err, took)
		}
	})
	t.Run("a lost quorum is not waited for", func(t *testing.T) {
		q := &handOver{err: reasonStatus(t, codes.Unavailable, "quorum lost: etcd has no leader", quorumLostReason)}
		q.answerAfter(time.Hour)
		qpath := writeConfig(t, ca, startManager2(t, ca, "127.0.0.3", q))
		var n notes
		began := time.Now()
		_, err := listNodeIDs(t, dial(t, qpath, WithCachePath(""), WithLeaderWait(15*time.Second, n.note)))
		if !errors.Is(err, ErrQuorumLost) || time.Since(began) > 5*time.Second || len(n.all()) != 0 {
			t.Errorf("error %v after %s, notes %q; want ErrQuorumLost at once, no wait", err, time.Since(began), n.all())
		}
	})
}

// startManager2 serves srv on a free port of ip and returns its address.
func startManager2(t *testing.T, ca *pki.CA, ip string, srv pb.ManagementServer) string {
	t.Helper()
	lis := listen(t, ip)
	serve(t, lis, ca, ca, srv)
	return lis.Addr().String()
}

// eventStream sends one answer per watch, with revision rev, then holds the
// stream open.
type eventStream struct {
	pb.UnimplementedManagementServer
	rev atomic.Int64
}

func (e *eventStream) WatchEvents(req *pb.WatchEventsRequest, s pb.Management_WatchEventsServer) error {
	if err := requireAdmin(s.Context()); err != nil {
		return err
	}
	if err := s.Send(&pb.WatchEventsResponse{Revision: e.rev.Add(1)}); err != nil {
		return err
	}
	<-s.Context().Done()
	return s.Context().Err()
}

// With WithFollowUntilCancelled a watch whose every manager went away waits
// for one to come back, says so, and follows on when it does; without, it
// gives up.
func TestFollowUntilCancelled(t *testing.T) {
	ca := newCA(t)
	e := &eventStream{}
	for _, forever := range []bool{false, true} {
		t.Run(fmt.Sprintf("forever=%v", forever), func(t *testing.T) {
			lis := listen(t, "127.0.0.4")
			addr := lis.Addr().String()
			stop := serve(t, lis, ca, ca, e)
			path := writeConfig(t, ca, addr)
			var n notes
			opts := []Option{WithCachePath("")}
			if forever {
				opts = append(opts, WithFollowUntilCancelled(n.note))
			}
			c := dial(t, path, opts...)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			answers := make(chan int64, 16)
			done := make(chan error, 1)
			go func() {
				done <- c.WatchEvents(ctx, 0, 1, func(r *pb.WatchEventsResponse) error {
					answers <- r.GetRevision()
					return nil
				})
			}()
			select {
			case <-answers:
			case <-time.After(10 * time.Second):
				t.Fatal("no first answer")
			}
			stop()
			if !forever {
				select {
				case err := <-done:
					if !errors.Is(err, ErrNoManager) {
						t.Errorf("watch ended with %v, want ErrNoManager", err)
					}
				case <-time.After(20 * time.Second):
					t.Fatal("the watch did not give up")
				}
				return
			}
			deadline := time.Now().Add(20 * time.Second)
			for len(n.all()) == 0 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if said := n.all(); len(said) != 1 || !strings.Contains(said[0], "waiting for one to come back") {
				t.Fatalf("notes %q, want one that says it waits for a manager", said)
			}
			select {
			case err := <-done:
				t.Fatalf("the watch ended while it should wait: %v", err)
			default:
			}
			// The manager comes back on its address: the watch follows on.
			lis2, err := net.Listen("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			serve(t, lis2, ca, ca, e)
			select {
			case <-answers:
			case <-time.After(20 * time.Second):
				t.Fatal("no answer after the manager came back")
			}
			if said := n.all(); len(said) != 2 || !strings.Contains(said[1], "answers again") {
				t.Errorf("notes %q, want a second that says a manager answers again", said)
			}
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("after cancel: %v", err)
			}
		})
	}
}
