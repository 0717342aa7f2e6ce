package curator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/curatorproject/curator/curator/spec"
	pb "github.com/curatorproject/curator/proto"
)

// A node's session stream (Heartbeat) through a follower outlives a
// change of leader. The follower holds the node's stream and
// forwards it upstream; when the leader moves (the forwarder closes its
// connection to the old one, or the old one ends the stream as not
// leader), the follower opens the stream again to the new leader, without
// the node noticing more than an answer that comes a little later: on the
// node's next heartbeat (which it sends first, so the new leader hears the
// node at once; the node's heartbeats come spread over an interval, and so
// do the re-opened streams), or after a wait spread over half an interval.
// The new leader's first answer carries the node's record and the
// manager list, as any stream's first answer does. Only the nodes whose manager
// died set up sessions anew; without this, every node of the fleet did at
// each failover, all within a second.
//
// The node's own deadline still holds: a heartbeat that the new leader
// does not answer in time ends the session at the node, which moves to
// another manager as before. A refusal from upstream (a come-back, the
// node removed) is passed on, never retried here.

// sessionMethod says whether method is the session stream, which
// survives a change of leader.
func sessionMethod(method string) bool {
	return method == pb.Curator_Heartbeat_FullMethodName
}

// leaderMoved says whether err, which ended a forwarded stream upstream
// while the caller's went on, is the leader going away rather than an
// answer of the leader's.
func leaderMoved(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	st := status.Convert(err)
	switch st.Code() {
	case codes.Canceled:
		// The forwarder closed the connection to the old leader.
		return true
	case codes.Unavailable:
		// The old leader said it no longer leads, or died; a refusal
		// with details (a come-back, no quorum) is an answer.
		return len(st.Details()) == 0
	}
	return false
}

// errCallerGone marks an error of the node's own stream.
type errCallerGone struct{ err error }

func (e errCallerGone) Error() string { return e.err.Error() }
func (e errCallerGone) Unwrap() error { return e.err }

// forwardSession forwards the session stream ss to the leader, and to each
// next one in turn while the node's stream lasts.
func (s *Service) forwardSession(ctx context.Context, id identity, srv any, info *grpc.StreamServerInfo, ss grpc.ServerStream, handler grpc.StreamHandler) error {
	inType, outType, err := methodTypes(info.FullMethod)
	if err != nil {
		return toStatus(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The node's messages, read in the background. The goroutine ends
	// when the node's stream does, which gRPC guarantees once this
	// handler returns.
	in := make(chan proto.Message)
	inErr := make(chan error, 1)
	go func() {
		for {
			m := inType.New().Interface()
			if err := ss.RecvMsg(m); err != nil {
				inErr <- err
				return
			}
			select {
			case in <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	var first carried
	for {
		next, moved, err := s.forwardSessionOnce(ctx, id, info, ss, outType, in, inErr, first)
		if errors.Is(err, errLeadsHere) {
			return s.serveSessionHere(ctx, id, srv, ss, handler, in, inErr, next)
		}
		if !moved {
			return err
		}
		s.metrics.SessionsReforwarded.Inc()
		first = next
	}
}

// carried is the node's message a forwarder sends first on a stream it
// opens again: the node's next heartbeat, or its last one again
// (replayed). A replayed heartbeat is answered, so the node's session goes
// on, but it is no news of the node: a node frozen since it sent it must
// not read as alive to the new leader (replayedKey says so upstream).
type carried struct {
	msg      proto.Message
	replayed bool
}

// replayedKey, in a session stream's metadata, says that the stream's
// first message is a heartbeat replayed by a forwarder (carried).
const replayedKey = "x-curator-replayed-first"

// firstReplayed says whether the first message of the session stream of
// ctx is a replayed heartbeat.
func firstReplayed(ctx context.Context) bool {
	return len(metadata.ValueFromIncomingContext(ctx, replayedKey)) > 0
}

// forwardSessionOnce forwards the session stream to the current leader
// until either side ends. moved says the leader went away while the node's
// stream goes on: then next is the node's message to send first to the
// next leader.
func (s *Service) forwardSessionOnce(ctx context.Context, id identity, info *grpc.StreamServerInfo, ss grpc.ServerStream, outType protoreflect.MessageType,
	in <-chan proto.Message, inErr <-chan error, first carried) (next carried, moved bool, err error) {
	if li := s.fwd.knownLeader(); li != nil && li.id == s.cfg.NodeID {
		// This manager was elected: it serves the stream itself, once
		// its leadership serves (a stream forwarded to it by another
		// manager that learned of the election first is held until
		// then, not refused).
		return first, false, errLeadsHere
	}
	conn, err := s.leaderConn(ctx)
	// The leader the stream goes to (leaderConn may have waited to learn
	// it).
	li := s.fwd.knownLeader()
	if err != nil {
		if errors.Is(err, spec.ErrNoLeader) || errors.Is(err, spec.ErrQuorum) {
			return carried{}, false, s.comeBackLater(err)
		}
		return carried{}, false, toStatus(err)
	}
	uctx, ucancel := context.WithCancel(ctx)
	desc := &grpc.StreamDesc{ServerStreams: info.IsServerStream, ClientStreams: info.IsClientStream}
	fctx := forwardContext(uctx, id)
	if first.replayed {
		fctx = metadata.AppendToOutgoingContext(fctx, replayedKey, "1")
	}
	cs, err := conn.NewStream(fctx, desc, info.FullMethod)
	if err != nil {
		ucancel()
		if first.msg != nil && !s.stopping.Load() && leaderMoved(ctx, err) {
			// Forwarding again, to a leader that went too (or the
			// connection to it closed as the next was learned): wait,
			// and forward to whoever leads then.
			return s.awaitReforward(ctx, in, inErr, first.msg, err)
		}
		return carried{}, false, forwardError(ss.Context(), err)
	}
	// The leader's answers and this follower's own (digests) go to the
	// node one at a time, as gRPC wants.
	var sendMu sync.Mutex
	send := func(m proto.Message) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return ss.SendMsg(m)
	}
	out := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			m := outType.New().Interface()
			if err := cs.RecvMsg(m); err != nil {
				out <- err
				return
			}
			if err := send(m); err != nil {
				out <- errCallerGone{err}
				return
			}
		}
	}()
	defer func() {
		ucancel()
		<-done
	}()
	// digesting says the leader reads nothing more of the stream: the
	// node's heartbeats go in this follower's liveness digests (liveness.go),
	// and pending is the one the follower answers once the leader took
	// the report that named it.
	digesting := false
	var pending *digestBatch
	var pendingSeq uint64
	// upstream sends m to the leader, switching the stream to digests
	// when the leader takes this follower's.
	upstream := func(m proto.Message) {
		if hb, ok := m.(*pb.HeartbeatRequest); ok && li != nil && s.digests.taken(li.id) {
			hb = proto.CloneOf(hb)
			hb.DigestsFollow = true
			m, digesting = hb, true
			s.metrics.SessionsDigested.Inc()
		}
		// A send error shows as the stream's status, from RecvMsg; the
		// message goes to the next leader then.
		_ = cs.SendMsg(m)
	}
	if first.msg != nil {
		upstream(first.msg)
	}
	// last is the node's message last sent upstream: sent again to the
	// next leader if the node sends none meanwhile (a node waits for the
	// answer to its stream's first heartbeat before it sends another).
	last := first.msg
	closedSend := false
	for {
		var acked <-chan struct{}
		if pending != nil {
			acked = pending.done
		}
		select {
		case m := <-in:
			last = m
			if digesting {
				hb, _ := m.(*pb.HeartbeatRequest)
				pending, pendingSeq = s.digests.add(id.nodeID), hb.GetSeq()
			} else {
				upstream(m)
			}
		case <-acked:
			if pending.ok {
				s.trace(livenessEvent{kind: answeredFor, manager: pending.leader, node: id.nodeID, seq: pendingSeq})
				// An error shows in the upstream reader's next send, or
				// in the node's stream.
				_ = send(&pb.HeartbeatResponse{IntervalMs: pending.interval, Seq: pendingSeq, Leader: pending.leader})
			}
			pending = nil
		case err := <-inErr:
			if !errors.Is(err, io.EOF) {
				return carried{}, false, err
			}
			if digesting {
				// The leader reads nothing more: the stream ends with
				// the node's.
				return carried{}, false, nil
			}
			_ = cs.CloseSend()
			closedSend = true
			inErr = nil
		case err := <-out:
			var gone errCallerGone
			switch {
			case errors.As(err, &gone):
				return carried{}, false, gone.err
			case errors.Is(err, io.EOF):
				return carried{}, false, nil
			case closedSend || s.stopping.Load() || !leaderMoved(ctx, err):
				return carried{}, false, forwardError(ss.Context(), err)
			}
			return s.awaitReforward(ctx, in, inErr, last, err)
		}
	}
}

// awaitReforward waits, after the leader went away under a forwarded
// session stream, for the moment to open it again: a wait spread over
// half an interval (so that the streams of a whole manager do not reach
// the new leader at once, and the election has a moment to name it), cut
// short by the node's next heartbeat. It returns the message to send
// first: that heartbeat, or the last one again, replayed.
func (s *Service) awaitReforward(ctx context.Context, in <-chan proto.Message, inErr <-chan error, last proto.Message, cause error) (carried, bool, error) {
	t := time.NewTimer(reforwardDelay(s.cfg.HeartbeatInterval, rand.Float64()))
	defer t.Stop()
	select {
	case <-t.C:
		return carried{msg: last, replayed: true}, true, nil
	case m := <-in:
		return carried{msg: m}, true, nil
	case err := <-inErr:
		if errors.Is(err, io.EOF) {
			return carried{}, false, forwardError(ctx, cause)
		}
		return carried{}, false, err
	case <-ctx.Done():
		return carried{}, false, ctx.Err()
	}
}

// reforwardDelay is the wait before a session stream is forwarded again
// to a new leader: u (uniform in [0, 1)) of half an interval, and at
// least reforwardMin, which leaves the election a moment.
func reforwardDelay(interval time.Duration, u float64) time.Duration {
	return reforwardMin + time.Duration(min(max(u, 0), 1)*float64(interval/2))
}

// reforwardMin is the least wait before a stream is forwarded again.
const reforwardMin = 50 * time.Millisecond

// errLeadsHere: the leader a session stream is to be forwarded to is this
// manager.
var errLeadsHere = errors.New("this manager leads")

// serveSessionHere serves a session stream that this manager forwarded
// until it was itself elected: with its own handler, as if the node had
// called it directly, its message first (the node's last heartbeat), so
// the node's stream goes on without a new
// session. A manager elected but not serving yet (it loads the registry
// first) is given electedServeWait; past it, the node is told to come
// back.
func (s *Service) serveSessionHere(ctx context.Context, id identity, srv any, ss grpc.ServerStream, handler grpc.StreamHandler, in <-chan proto.Message, inErr <-chan error, first carried) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	deadline := time.Now().Add(electedServeWait)
	for s.currentLeader() == nil {
		if time.Now().After(deadline) {
			return s.comeBackLater(spec.ErrNoLeader)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := s.checkNodeMember(ctx, id); err != nil {
		return toStatus(err)
	}
	s.metrics.SessionsReforwarded.Inc()
	if first.replayed {
		md, _ := metadata.FromIncomingContext(ctx)
		md = md.Copy()
		md.Set(replayedKey, "1")
		ctx = metadata.NewIncomingContext(ctx, md)
	}
	return toStatus(handler(srv, &heldStream{ServerStream: ss, ctx: ctx, first: first.msg, in: in, inErr: inErr}))
}

// electedServeWait bounds how long a manager that won the election holds
// a session stream until its leadership serves. Holding costs a
// goroutine; refusing costs every node of a failover a new session at
// once, the moment the new leader is busiest, so the bound is generous.
const electedServeWait = 10 * time.Second

// heldStream is a node's stream, whose messages a forwarder has been
// reading, handed to this manager's own handler: RecvMsg gives first,
// then what the forwarder's reader gets.
type heldStream struct {
	grpc.ServerStream
	ctx   context.Context
	first proto.Message
	in    <-chan proto.Message
	inErr <-chan error
	// err is the reader's error once it has ended.
	err error
}

func (h *heldStream) Context() context.Context { return h.ctx }

func (h *heldStream) RecvMsg(m any) error {
	dst, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("%w: message of type %T", spec.ErrInvalid, m)
	}
	if h.first != nil {
		proto.Reset(dst)
		proto.Merge(dst, h.first)
		h.first = nil
		return nil
	}
	if h.err != nil {
		return h.err
	}
	select {
	case msg := <-h.in:
		proto.Reset(dst)
		proto.Merge(dst, msg)
		return nil
	case err := <-h.inErr:
		h.err = err
		return err
	case <-h.ctx.Done():
		return h.ctx.Err()
	}
}

// comeBackLater is err, from a manager that cannot serve a session now
// (no leader known, no quorum), with a time to come back: a slot of the
// session gate, at least a quarter interval away, so the refused spread.
func (s *Service) comeBackLater(err error) error {
	wait := max(s.sessions.later(s.cfg.Now()), s.cfg.HeartbeatInterval/4)
	return toStatus(withComeBack(err, wait))
}
