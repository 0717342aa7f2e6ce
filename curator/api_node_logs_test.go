package curator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/curatorproject/curator/proto"
)

// logsNode stands in for a node agent's side of `curator logs`: it holds
// a session stream, and answers each request the stream pushes with its
// lines (those at or after since, the last tail), then with follow one
// more line each time more is sent on, until the leader ends the call.
type logsNode struct {
	lines []*pb.LogLine
	more  chan string
	// ended gets how each SendLogs call ended, from the node's side.
	ended chan error
}

// Its session goes through conn, its answers through send.
func startLogsNode(t *testing.T, conn, send *grpc.ClientConn, lines []*pb.LogLine) *logsNode {
	t.Helper()
	ln := &logsNode{lines: lines, more: make(chan string, 8), ended: make(chan error, 8)}
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := pb.NewCuratorClient(conn).Heartbeat(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := stream.Send(&pb.HeartbeatRequest{Version: "test"}); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			resp, err := stream.Recv()
			if err != nil {
				return
			}
			if resp.Logs != nil {
				ln.answer(ctx, send, resp.Logs)
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return ln
}

func (ln *logsNode) answer(ctx context.Context, conn *grpc.ClientConn, req *pb.LogsRequest) {
	s, err := pb.NewCuratorClient(conn).SendLogs(ctx)
	if err != nil {
		ln.ended <- err
		return
	}
	var out []*pb.LogLine
	for _, l := range ln.lines {
		if req.Since == nil || !l.Time.AsTime().Before(req.Since.AsTime()) {
			out = append(out, l)
		}
	}
	if req.Tail > 0 && len(out) > int(req.Tail) {
		out = out[len(out)-int(req.Tail):]
	}
	if err := s.Send(&pb.LogChunk{RequestId: req.Id, Lines: out}); err != nil {
		ln.ended <- err
		return
	}
	if !req.Follow {
		_ = s.CloseSend()
		_, err := s.Recv()
		ln.ended <- err
		return
	}
	recv := make(chan error, 1)
	go func() {
		_, err := s.Recv()
		recv <- err
	}()
	for {
		select {
		case text := <-ln.more:
			_ = s.Send(&pb.LogChunk{Lines: []*pb.LogLine{{Time: timestamppb.Now(), Text: text}}})
		case err := <-recv:
			ln.ended <- err
			return
		}
	}
}

// readLogs reads a NodeLogs stream's lines until it ends or n lines
// came (n > 0).
func readLogs(stream grpc.ServerStreamingClient[pb.NodeLogsResponse], n int) (node string, texts []string, err error) {
	for n <= 0 || len(texts) < n {
		resp, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return node, texts, err
		}
		if resp.NodeId != "" {
			node = resp.NodeId
		}
		for _, l := range resp.Lines {
			texts = append(texts, l.Text)
		}
	}
	return node, texts, nil
}

// TestNodeLogs: the leader asks a node for its logs over the node's
// session stream and relays the node's answer, as the request filters
// it; a follow goes on until the caller goes, which ends the node's
// call too; a node with no session is an error that names it; a node
// cannot answer a request that was not made to it.
func TestNodeLogs(t *testing.T) {
	c := newTestCluster(t)
	c.startLeader()
	adminConn, anon := c.dialFirst()
	api := pb.NewManagementClient(adminConn)
	w1, _ := c.register(anon, c.token(adminConn, "worker"), "w1")
	w2, _ := c.register(anon, c.token(adminConn, "worker"), "w2")

	// w2 has no session: its logs cannot be read.
	stream, err := api.NodeLogs(callCtx(t), &pb.NodeLogsRequest{Id: "w2"})
	if err == nil {
		_, _, err = readLogs(stream, 0)
	}
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "node w2 ("+w2.id+") has no session with the leader") {
		t.Errorf("the logs of a node with no session: %v, want FailedPrecondition naming it", err)
	}

	base := time.Now().Add(-time.Hour)
	var lines []*pb.LogLine
	for i := range 5 {
		lines = append(lines, &pb.LogLine{Time: timestamppb.New(base.Add(time.Duration(i) * time.Minute)), Text: fmt.Sprintf("line %d", i)})
	}
	conn := dial(t, c.first.address, w1.tlsCert(), c.root.Cert)
	node := startLogsNode(t, conn, conn, lines)
	for _, tc := range []struct {
		name string
		req  *pb.NodeLogsRequest
		want []string
	}{
		{"every line", &pb.NodeLogsRequest{Id: "w1"}, []string{"line 0", "line 1", "line 2", "line 3", "line 4"}},
		{"since", &pb.NodeLogsRequest{Id: w1.id[:8], Since: timestamppb.New(base.Add(3 * time.Minute))}, []string{"line 3", "line 4"}},
		{"tail", &pb.NodeLogsRequest{Id: "w1", Tail: 2}, []string{"line 3", "line 4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stream grpc.ServerStreamingClient[pb.NodeLogsResponse]
			var got []string
			var id string
			// The node's session may still be opening.
			deadline := time.Now().Add(testTimeout)
			for {
				stream, err = api.NodeLogs(callCtx(t), tc.req)
				if err == nil {
					id, got, err = readLogs(stream, 0)
				}
				if status.Code(err) != codes.FailedPrecondition || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil {
				t.Fatal(err)
			}
			if id != w1.id {
				t.Errorf("the answer names node %q, want %s", id, w1.id)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("lines (-want +got):\n%s", diff)
			}
			if err := <-node.ended; err != io.EOF {
				t.Errorf("the node's call ended with %v, want its end (EOF)", err)
			}
		})
	}

	// A follow: the lines kept, then each new one; the caller going ends
	// the node's call.
	ctx, cancel := context.WithCancel(callCtx(t))
	stream, err = api.NodeLogs(ctx, &pb.NodeLogsRequest{Id: "w1", Tail: 1, Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, got, err := readLogs(stream, 1); err != nil || !cmp.Equal(got, []string{"line 4"}) {
		t.Fatalf("follow: %v (%v), want the last line", got, err)
	}
	node.more <- "line 5"
	if _, got, err := readLogs(stream, 1); err != nil || !cmp.Equal(got, []string{"line 5"}) {
		t.Fatalf("follow: %v (%v), want the new line", got, err)
	}
	cancel()
	select {
	case err := <-node.ended:
		if err == nil {
			t.Errorf("the node's follow ended with no error, want the leader's end of it")
		}
	case <-time.After(testTimeout):
		t.Fatal("the caller went, and the node's follow goes on")
	}

	// A node answering a request it was not sent is refused.
	s, err := pb.NewCuratorClient(conn).SendLogs(callCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&pb.LogChunk{RequestId: "made-up"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); status.Code(err) != codes.NotFound {
		t.Errorf("an answer to no request: %v, want NotFound", err)
	}
}

// TestNodeLogsThroughFollowers: the node's session held by one follower,
// its answer sent to another, the operator's call to a third manager's
// follower: the lines come all the same.
func TestNodeLogsThroughFollowers(t *testing.T) {
	c := newTestCluster(t)
	three := startThree(c)
	w1, _ := c.register(three.anon, c.token(three.admin, "worker"), "w1")
	lines := []*pb.LogLine{{Time: timestamppb.Now(), Text: "through followers"}}
	startLogsNode(t, dial(t, three.m2.address, w1.tlsCert(), c.root.Cert), dial(t, three.m3.address, w1.tlsCert(), c.root.Cert), lines)
	adminCert := c.adminCert()
	api := pb.NewManagementClient(dial(t, three.m3.address, &adminCert, c.root.Cert))
	deadline := time.Now().Add(testTimeout)
	for {
		stream, err := api.NodeLogs(callCtx(t), &pb.NodeLogsRequest{Id: "w1"})
		var got []string
		if err == nil {
			_, got, err = readLogs(stream, 0)
		}
		if err == nil {
			if diff := cmp.Diff([]string{"through followers"}, got); diff != "" {
				t.Errorf("lines (-want +got):\n%s", diff)
			}
			return
		}
		if status.Code(err) != codes.FailedPrecondition || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
