package curator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/curatorproject/curator/curator/internal/leader"
	"github.com/curatorproject/curator/curator/spec"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

// Liveness digests. A follower that holds a node's session forwards only
// the stream's first heartbeat to the leader (marked digests_follow once
// the leader takes this follower's digests); the node's later heartbeats
// go in the follower's digest, one report per digestPeriod on one stream
// per follower (Liveness), and the follower answers each heartbeat itself
// once the leader has acknowledged the report that named it: an answer
// still means the leader heard the node, so a follower cut off from the
// leader (or a leader that stopped serving) answers nothing, and its nodes
// move to another manager at their deadline, as before. The leader's work
// per heartbeat is then an entry in a report, not a message received and
// answered on a stream of its own (a read, a wake-up of the stream's
// goroutine and a write each); the node's stream stays open through the
// leader for what the leader pushes (the node's record, the manager list)
// and for its end (the node removed, the leadership over).

// The promise of the digests, which a test checks on the history of
// livenessEvents: a node's heartbeat is answered in a leader's name only
// by that leader itself, or by a follower once that leader took a digest
// that named the node (one take for each such answer).

// livenessEvent is one step of that history.
type livenessEvent struct {
	kind livenessEventKind
	// manager is the leader that answered or took; for answeredFor, the
	// leader whose name the follower answered in.
	manager string
	node    string
	seq     uint64
	// ids are the nodes a digest named (took).
	ids []string
	// follow: the heartbeat answered here switched its stream to digests.
	follow bool
}

type livenessEventKind int

const (
	// answeredHere: the leader answered a heartbeat it read itself.
	answeredHere livenessEventKind = iota
	// took: the leader took a digest (before it acknowledged it).
	took
	// answeredFor: a follower answered a heartbeat in the leader's name.
	answeredFor
)

// trace tells a test's livenessTrace of ev (nothing without one).
func (s *Service) trace(ev livenessEvent) {
	if f := s.livenessTrace.Load(); f != nil {
		(*f)(ev)
	}
}

// digestPeriod is how long a follower gathers heartbeats before it reports
// them: a twentieth of an interval, at most 100 ms (an answer comes that
// much later than a forwarded one did; a node waits two intervals).
func digestPeriod(interval time.Duration) time.Duration {
	return max(min(interval/20, 100*time.Millisecond), time.Millisecond)
}

// digestBatch is the heartbeats a follower reports in one LivenessReport.
// done is closed once the report is acknowledged (ok, with the leader that
// took it) or failed.
type digestBatch struct {
	ids  []string
	done chan struct{}
	// Set before done is closed.
	ok       bool
	leader   string
	interval uint32
}

// end closes the batch: acknowledged by ack, or failed (ack nil).
func (b *digestBatch) end(ack *pb.LivenessAck) {
	if ack != nil {
		b.ok, b.leader, b.interval = true, ack.Leader, ack.IntervalMs
	}
	close(b.done)
}

// livenessDigests is a follower's digest of the heartbeats it takes.
type livenessDigests struct {
	mu   sync.Mutex
	next *digestBatch
	// takenBy is the leader that acknowledged this follower's last
	// report ("" after a failure): a session forwarded to it is switched
	// to digests.
	takenBy string
}

// add puts a heartbeat of node id in the next report and returns it.
func (d *livenessDigests) add(id string) *digestBatch {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.next == nil {
		d.next = &digestBatch{done: make(chan struct{})}
	}
	d.next.ids = append(d.next.ids, id)
	return d.next
}

// take returns the next report's batch (nil: no heartbeat waits) and
// starts another.
func (d *livenessDigests) take() *digestBatch {
	d.mu.Lock()
	defer d.mu.Unlock()
	b := d.next
	d.next = nil
	return b
}

// taken says whether leader takes this follower's reports.
func (d *livenessDigests) taken(leader string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return leader != "" && d.takenBy == leader
}

func (d *livenessDigests) setTakenBy(leader string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.takenBy = leader
}

// runLiveness reports this follower's digests to the leader, one report
// per digestPeriod while heartbeats wait, on one stream to the leader.
// When the leader changes, a report with no heartbeat tells whether the
// new one takes digests (a leader of an older version does not: sessions
// forwarded to it go on forwarding every heartbeat).
func (s *Service) runLiveness(ctx context.Context) error {
	supervisor.Signal(ctx, supervisor.Healthy)
	lg := supervisor.Logger(ctx)
	period := digestPeriod(s.cfg.HeartbeatInterval)
	tick := time.NewTicker(period)
	defer tick.Stop()
	var r livenessReporter
	defer r.close()
	// refusedBy is a leader that does not serve Liveness (Unimplemented):
	// not asked again while it leads. After a failure, the next question
	// waits for probeAt (a report of heartbeats does not).
	refusedBy := ""
	var probeAt time.Time
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		b := s.digests.take()
		li := s.fwd.knownLeader()
		if li == nil || li.id == s.cfg.NodeID || s.currentLeader() != nil {
			// No leader to report to, or this manager leads: its
			// forwarded sessions are its own now (serveSessionHere).
			if b != nil {
				b.end(nil)
			}
			r.close()
			s.digests.setTakenBy("")
			continue
		}
		if b == nil {
			if s.digests.taken(li.id) || refusedBy == li.id || time.Now().Before(probeAt) {
				continue
			}
			// A new leader: ask whether it takes digests.
			b = &digestBatch{done: make(chan struct{})}
		}
		ack, err := r.report(ctx, s, li.id, b.ids, max(s.cfg.HeartbeatInterval, time.Second))
		if err != nil {
			b.end(nil)
			s.digests.setTakenBy("")
			r.close()
			if status.Code(err) == codes.Unimplemented {
				refusedBy = li.id
			}
			probeAt = time.Now().Add(min(s.cfg.HeartbeatInterval/2, time.Second))
			if ctx.Err() == nil {
				lg.Debug("liveness report not taken", zap.String("leader", li.id), zap.Error(err))
			}
			continue
		}
		s.metrics.LivenessReports.Inc()
		s.digests.setTakenBy(ack.Leader)
		b.end(ack)
	}
}

// livenessReporter is a follower's Liveness stream to one leader.
type livenessReporter struct {
	leader string
	stream grpc.BidiStreamingClient[pb.LivenessReport, pb.LivenessAck]
	cancel context.CancelFunc
	batch  uint64
}

func (r *livenessReporter) close() {
	if r.cancel != nil {
		r.cancel()
	}
	*r = livenessReporter{batch: r.batch}
}

// report sends ids to leader and waits for its acknowledgement, at most
// timeout.
func (r *livenessReporter) report(ctx context.Context, s *Service, leader string, ids []string, timeout time.Duration) (*pb.LivenessAck, error) {
	if r.stream == nil || r.leader != leader {
		r.close()
		conn, err := s.leaderConn(ctx)
		if err != nil {
			return nil, err
		}
		sctx, cancel := context.WithCancel(ctx)
		stream, err := pb.NewCuratorClient(conn).Liveness(sctx)
		if err != nil {
			cancel()
			return nil, err
		}
		r.leader, r.stream, r.cancel = leader, stream, cancel
	}
	r.batch++
	// A leader that does not answer in time ends the stream.
	late := time.AfterFunc(timeout, r.cancel)
	defer late.Stop()
	if err := r.stream.Send(&pb.LivenessReport{Batch: r.batch, NodeIds: ids}); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	ack, err := r.stream.Recv()
	if err != nil {
		return nil, err
	}
	if ack.Batch != r.batch {
		return nil, fmt.Errorf("the leader acknowledged report %d, want %d", ack.Batch, r.batch)
	}
	return ack, nil
}

// Liveness takes a follower's digests: each node a report names is heard
// now, as if it had sent its heartbeat here. Only a manager may report;
// a leadership that ends, or a lease in doubt, ends the stream.
func (a *nodeAPI) Liveness(stream grpc.BidiStreamingServer[pb.LivenessReport, pb.LivenessAck]) error {
	s := a.s
	st, err := s.leaderFor()
	if err != nil {
		return err
	}
	id := identityFrom(stream.Context()).nodeID
	if n := st.Reg.Node(id); n == nil || !spec.HasRole(n, pb.Role_ROLE_CONSENSUS) {
		return fmt.Errorf("%w: node %s is not a manager: only a manager reports the liveness of the sessions it holds", spec.ErrDenied, id)
	}
	doubt := st.Guard.ServingDone()
	interval := uint32(s.cfg.HeartbeatInterval / time.Millisecond)
	for {
		rep, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case <-st.Ctx.Done():
			return spec.ErrNotLeader
		case <-doubt:
			return spec.ErrNotLeader
		default:
		}
		hearDigest(st, rep.NodeIds, s.cfg.Now())
		s.metrics.LivenessHeartbeats.Add(float64(len(rep.NodeIds)))
		s.trace(livenessEvent{kind: took, manager: s.cfg.NodeID, ids: rep.NodeIds})
		if err := stream.Send(&pb.LivenessAck{Batch: rep.Batch, Leader: s.cfg.NodeID, IntervalMs: interval}); err != nil {
			return err
		}
	}
}

// hearDigest takes the nodes of a liveness report as heard at now. A node
// with no record (removed) is not heard: its stream ends.
func hearDigest(st *leader.State, ids []string, now time.Time) {
	kick := false
	heard := make([]string, 0, len(ids))
	for _, id := range ids {
		n := st.Reg.Node(id)
		if n == nil {
			continue
		}
		heard = append(heard, id)
		if n.Status != pb.NodeStatus_NODE_STATUS_READY {
			kick = true
		}
	}
	// One lock for the report, not taken under the registry's.
	st.Heartbeats.BeatAll(heard, now)
	if kick {
		supervisor.Kick(st.KickHealth)
	}
}
