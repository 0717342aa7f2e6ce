package node

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/curatorproject/curator/pki/pkitest"
	pb "github.com/curatorproject/curator/proto"
)

// movingManager is a manager's node API that answers heartbeats, asking
// the node to move within moveMs (0: never) or, with refuse, refuses
// every session set-up; it counts the set-ups and the heartbeats.
type movingManager struct {
	pb.UnimplementedCuratorServer
	moveMs uint32
	refuse bool
	setUps atomic.Int32
	beats  atomic.Int32
	addr   string
}

func (m *movingManager) Heartbeat(stream grpc.BidiStreamingServer[pb.HeartbeatRequest, pb.HeartbeatResponse]) error {
	m.setUps.Add(1)
	if m.refuse {
		return status.Error(codes.Unavailable, "this manager cannot reach the leader")
	}
	for {
		req, err := stream.Recv()
		if err != nil {
			return err
		}
		m.beats.Add(1)
		if err := stream.Send(&pb.HeartbeatResponse{Seq: req.Seq, MoveWithinMs: m.moveMs}); err != nil {
			return err
		}
	}
}

// TestSessionMovesOffTheLeader: a leader that asks the node to move (its
// answers carry move_within_ms) sees the node's session go to the other
// manager within the window, and no set-up after. When the other manager
// takes no session, the node comes back to the leader and stays there,
// the leader's asking again notwithstanding: it never flaps.
func TestSessionMovesOffTheLeader(t *testing.T) {
	tt := pkitest.New(t)
	serve := func(m *movingManager) { m.addr = serveNodeAPI(t, tt, m, nil) }
	const within = 300 * time.Millisecond
	for _, tc := range []struct {
		name string
		// whether the other manager takes sessions.
		otherTakes bool
		// set-ups the leader sees over the run.
		wantLeaderSetUps int32
	}{
		{"the other manager takes the session", true, 1},
		{"no other manager takes it: back to the leader, for good", false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leader, other := &movingManager{moveMs: uint32(within / time.Millisecond)}, &movingManager{refuse: !tc.otherTakes}
			serve(leader)
			serve(other)
			var ends []error
			endsCh := make(chan error, 100)
			s, err := NewSession(SessionConfig{
				TLS:      tt.Client,
				Interval: 100 * time.Millisecond,
				Managers: func() []string { return []string{leader.addr, other.addr} },
				OnEnd:    func(_ context.Context, _ string, err error) { endsCh <- err },
			})
			if err != nil {
				t.Fatal(err)
			}
			s.conns.next = 0 // the leader first
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- s.Run(ctx) }()
			time.Sleep(within + 1500*time.Millisecond)
			beatsBefore := leader.beats.Load() + other.beats.Load()
			time.Sleep(500 * time.Millisecond)
			cancel()
			<-done
			s.Close()
			close(endsCh)
			for err := range endsCh {
				ends = append(ends, err)
			}
			if got := leader.setUps.Load(); got != tc.wantLeaderSetUps {
				t.Errorf("the leader saw %d set-ups, want %d (ends: %v)", got, tc.wantLeaderSetUps, ends)
			}
			if !errors.Is(ends[0], ErrSessionMoved) {
				t.Errorf("the first session ended with %v, want the move", ends[0])
			}
			if tc.otherTakes && other.setUps.Load() != 1 {
				t.Errorf("the other manager saw %d set-ups, want 1", other.setUps.Load())
			}
			if after := leader.beats.Load() + other.beats.Load(); after-beatsBefore < 3 {
				t.Errorf("%d heartbeats answered in the last 500 ms (interval 100 ms): the session is not up", after-beatsBefore)
			}
		})
	}
}

// slowManager answers each heartbeat after delay.
type slowManager struct {
	pb.UnimplementedCuratorServer
	delay time.Duration
}

func (m *slowManager) Heartbeat(stream grpc.BidiStreamingServer[pb.HeartbeatRequest, pb.HeartbeatResponse]) error {
	for {
		req, err := stream.Recv()
		if err != nil {
			return err
		}
		time.Sleep(m.delay)
		if err := stream.Send(&pb.HeartbeatResponse{Seq: req.Seq}); err != nil {
			return err
		}
	}
}

// TestSessionTimesAnswers: a session reports how long each heartbeat
// waited for its answer (the agent's curator_agent_heartbeat_answer_seconds).
func TestSessionTimesAnswers(t *testing.T) {
	tt := pkitest.New(t)
	const delay = 150 * time.Millisecond
	addr := serveNodeAPI(t, tt, &slowManager{delay: delay}, nil)
	took := make(chan time.Duration, 100)
	s, err := NewSession(SessionConfig{
		TLS:        tt.Client,
		Interval:   300 * time.Millisecond,
		Managers:   func() []string { return []string{addr} },
		OnAnswered: func(d time.Duration) { took <- d },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done; s.Close() }()
	for i := range 3 {
		select {
		case d := <-took:
			if d < delay || d > delay+2*time.Second {
				t.Errorf("answer %d took %v by the session, want about %v", i+1, d, delay)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no answer timed after %d", i)
		}
	}
}
