package curator

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
)

// A node's logs reach an operator through the managers (`curator logs`),
// with no shell on the machine and no listener on the node: the node
// always dials, never the leader. NodeLogs (on the leader) pushes a
// LogsRequest on the node's session stream, which reaches the node
// directly or through the follower that holds its session; the node
// answers with SendLogs (to any manager: followers forward it), naming
// the request; the leader relays what comes to the caller. The relay
// ends with either side: the node's stream ending (all lines sent), the
// caller going (a --follow interrupted), or the leadership ending.
//
// Assumptions:
//   - the node keeps its lines (node.LogRing): the leader keeps nothing;
//   - a request the node never answers (an agent of an older release) is
//     given up after logAnswerWait, with a message that says so.

// logAnswerWait bounds how long NodeLogs waits for the node to answer.
const logAnswerWait = 10 * time.Second

// logRelay is one NodeLogs call waiting for, then relaying, its node's
// lines.
type logRelay struct {
	node string
	// chunks carries the node's lines to the caller's stream; answered
	// is closed when the node's SendLogs takes the relay, ended when it
	// is done sending (all lines sent, or its stream failed).
	chunks   chan []*pb.LogLine
	answered chan struct{}
	ended    chan struct{}
	// done is closed when the caller's call ends: the node's stream is
	// ended then.
	done chan struct{}
	once sync.Once
}

// logRelays are the NodeLogs calls in flight on this leader, by request
// ID.
type logRelays struct {
	mu sync.Mutex
	m  map[string]*logRelay
}

func (lr *logRelays) add(id string, r *logRelay) func() {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	if lr.m == nil {
		lr.m = map[string]*logRelay{}
	}
	lr.m[id] = r
	return func() {
		lr.mu.Lock()
		defer lr.mu.Unlock()
		delete(lr.m, id)
		close(r.done)
	}
}

// take is the relay of request id for node, once.
func (lr *logRelays) take(id, node string) (*logRelay, error) {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	r := lr.m[id]
	if r == nil || r.node != node {
		return nil, fmt.Errorf("%w: no request %s for the logs of node %s on this leader (the caller went, or the leader changed)", spec.ErrNotFound, spec.QuoteShort(id), node)
	}
	taken := false
	r.once.Do(func() { taken = true; close(r.answered) })
	if !taken {
		return nil, fmt.Errorf("%w: request %s was answered already", spec.ErrPrecondition, spec.QuoteShort(id))
	}
	return r, nil
}

// NodeLogs streams a node's log lines to the caller.
func (m *managementAPI) NodeLogs(req *pb.NodeLogsRequest, stream grpc.ServerStreamingServer[pb.NodeLogsResponse]) error {
	st, err := m.s.leaderFor()
	if err != nil {
		return err
	}
	ctx := stream.Context()
	n, err := store.NodeResolve(st.Reg.Nodes(), req.Id)
	if err != nil {
		return err
	}
	name := nodeWords(n)
	var b [12]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	r := &logRelay{node: n.Id, chunks: make(chan []*pb.LogLine, 16), answered: make(chan struct{}), ended: make(chan struct{}), done: make(chan struct{})}
	defer m.s.logRelays.add(id, r)()
	if !st.Pushes.PushLogs(n.Id, &pb.LogsRequest{Id: id, Since: req.Since, Tail: req.Tail, Follow: req.Follow}) {
		return fmt.Errorf("%w: node %s has no session with the leader (status %s): it is down or cut off, and its logs cannot be read through the managers; "+
			"on its machine they are where the agent's stderr goes (journalctl -u curator-agent, or the process provider's DIR/instances/ID/agent.log)",
			spec.ErrPrecondition, name, strings.ToLower(strings.TrimPrefix(n.Status.String(), "NODE_STATUS_")))
	}
	wait := time.NewTimer(logAnswerWait)
	defer wait.Stop()
	select {
	case <-r.answered:
	case <-wait.C:
		return fmt.Errorf("%w: node %s did not answer the request for its logs within %s (an agent of a release before `curator logs` cannot)", spec.ErrPrecondition, name, logAnswerWait)
	case <-ctx.Done():
		return ctx.Err()
	case <-st.Ctx.Done():
		return spec.ErrNotLeader
	}
	if err := stream.Send(&pb.NodeLogsResponse{NodeId: n.Id}); err != nil {
		return err
	}
	for {
		select {
		case lines := <-r.chunks:
			if err := stream.Send(&pb.NodeLogsResponse{Lines: lines}); err != nil {
				return err
			}
		case <-r.ended:
			// What the node sent before it ended is in chunks still.
			for {
				select {
				case lines := <-r.chunks:
					if err := stream.Send(&pb.NodeLogsResponse{Lines: lines}); err != nil {
						return err
					}
				default:
					return nil
				}
			}
		case <-ctx.Done():
			return ctx.Err()
		case <-st.Ctx.Done():
			return spec.ErrNotLeader
		}
	}
}

// nodeWords names a node for a message: its name and ID.
func nodeWords(n *pb.Node) string {
	if n.Name == "" || n.Name == n.Id {
		return n.Id
	}
	return fmt.Sprintf("%s (%s)", n.Name, n.Id)
}

// SendLogs takes a node's answer to a LogsRequest and hands its lines to
// the NodeLogs call that asked.
func (a *nodeAPI) SendLogs(stream grpc.BidiStreamingServer[pb.LogChunk, pb.SendLogsResponse]) error {
	st, err := a.s.leaderFor()
	if err != nil {
		return err
	}
	ctx := stream.Context()
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	r, err := a.s.logRelays.take(first.RequestId, identityFrom(ctx).nodeID)
	if err != nil {
		return err
	}
	defer close(r.ended)
	in := make(chan []*pb.LogLine)
	inErr := make(chan error, 1)
	go func() {
		for {
			c, err := stream.Recv()
			if err != nil {
				inErr <- err
				return
			}
			select {
			case in <- c.Lines:
			case <-r.done:
				inErr <- io.EOF
				return
			}
		}
	}()
	if len(first.Lines) > 0 {
		select {
		case r.chunks <- first.Lines:
		case <-r.done:
			return nil
		}
	}
	for {
		select {
		case lines := <-in:
			select {
			case r.chunks <- lines:
			case <-r.done:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		case err := <-inErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-r.done:
			// The caller went: ending this call ends the node's sends.
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-st.Ctx.Done():
			return spec.ErrNotLeader
		}
	}
}
