package consensus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// Who etcd hears from now. A voter killed a moment ago still looks alive
// to the curator's heartbeats until down-after; etcd knows at once, and a
// membership change that trusted the heartbeats alone would move etcd
// leadership to the dead member and wait for it. Hearer.Hear asks every
// voter's own member for its status, in parallel, each within
// HearTimeout. The raft leader's own view (its followers' Progress, its
// transport's ActiveSince) is not exposed by the embedded server, and it
// is most often in another manager's process than the curator leader's
// (the placement loop keeps them apart); the members' answers are what
// etcd's Maintenance API gives any caller, bounded.
//
// A voter is heard when it answered, and follows the leader that answered
// for itself, in that leader's term. The assumptions:
//   - a member that answers and follows the leader's term receives the
//     leader's appends: etcd's pre-vote and check-quorum make a follower
//     cut off from the leader drop it (Leader 0) within an election
//     timeout;
//   - a member the curator leader cannot reach counts as unheard, even if
//     etcd's leader hears it: that can only refuse a change, never allow
//     one (the guard asks the heartbeats and etcd both);
//   - with no leader answering, no voter is heard: no removal and no
//     transfer of leadership then, which etcd could not make anyway.

// HearTimeout bounds each member's answer in Hearer.Hear.
const HearTimeout = 500 * time.Millisecond

// Hearing is what Hearer.Hear found.
type Hearing struct {
	// Leader is the member that answered as etcd's leader; 0 if none did.
	Leader uint64
	// Heard holds the voters etcd hears from now.
	Heard map[uint64]bool
	// Why says, when Leader is 0, why no leader answered.
	Why string
}

// Hearer asks who etcd hears from (Hear) over a connection to each member
// that it keeps between calls (the membership loops observe a few times a
// second each; a new TLS connection to every voter each time would cost
// more than the question). A connection that fails is closed and made
// again on the next call, so a member that comes back is heard at once,
// not after gRPC's reconnection backoff. Close it when done.
//
// A member that left its last question unanswered for HearTimeout (a
// frozen process, a partition: silence, not a refusal) is not waited on
// again: Hear counts it unheard at once and asks it again in the
// background, and waits on it again once it has answered. Otherwise every
// observation, and so every read of the management API, would pay
// HearTimeout while a voter is silent.
type Hearer struct {
	cli    *clientv3.Client
	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn // by client URL
	silent map[string]bool             // by client URL: its last question timed out
	asking map[string]bool             // by client URL: a background question in flight
	bg     sync.WaitGroup              // the background questions
	closed bool                        // keep no more connections
}

// NewHearer returns a Hearer that dials members with cli's credentials.
func NewHearer(cli *clientv3.Client) *Hearer {
	return &Hearer{cli: cli, conns: map[string]*grpc.ClientConn{}, silent: map[string]bool{}, asking: map[string]bool{}}
}

// Close closes the connections the Hearer keeps, and waits for its
// background questions (HearTimeout at most). A Hear after it keeps none:
// each connection is closed after its question.
func (h *Hearer) Close() {
	h.mu.Lock()
	h.closed = true
	for u, c := range h.conns {
		c.Close()
		delete(h.conns, u)
	}
	h.mu.Unlock()
	h.bg.Wait()
}

// askLater asks a silent member again in the background, unless a question
// to it is in flight already: its answer (status) lets the next Hear wait
// on it again.
func (h *Hearer) askLater(clientURL string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.asking[clientURL] || h.closed {
		return
	}
	h.asking[clientURL] = true
	h.bg.Go(func() {
		h.status(context.Background(), clientURL)
		h.mu.Lock()
		delete(h.asking, clientURL)
		h.mu.Unlock()
	})
}

// Hear asks the voters among members who etcd hears from now; see above.
// It never fails: a voter that does not answer is not heard.
func (h *Hearer) Hear(ctx context.Context, members []Member) Hearing {
	type answer struct {
		leader, term uint64
	}
	var (
		mu      sync.Mutex
		answers = map[uint64]answer{}
		errs    []error
		wg      sync.WaitGroup
	)
	h.forgetAllBut(members)
	for _, m := range members {
		if m.IsLearner || m.ClientURL == "" {
			continue
		}
		h.mu.Lock()
		silent := h.silent[m.ClientURL]
		h.mu.Unlock()
		if silent {
			h.askLater(m.ClientURL)
			errs = append(errs, fmt.Errorf("%s: did not answer within %v (asked again)", hexID(m.ID), HearTimeout))
			continue
		}
		wg.Go(func() {
			st, err := h.status(ctx, m.ClientURL)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", hexID(m.ID), err))
				return
			}
			if st.Header.GetMemberId() != m.ID {
				errs = append(errs, fmt.Errorf("%s: answered as member %s", hexID(m.ID), hexID(st.Header.GetMemberId())))
				return
			}
			answers[m.ID] = answer{leader: st.Leader, term: st.RaftTerm}
		})
	}
	wg.Wait()
	out := Hearing{Heard: map[uint64]bool{}}
	var term uint64
	for id, a := range answers {
		if a.leader == id && (out.Leader == 0 || a.term > term) {
			out.Leader, term = id, a.term
		}
	}
	if out.Leader == 0 {
		out.Why = "etcd's leader does not answer"
		if len(errs) > 0 {
			msgs := make([]string, len(errs))
			for i, err := range errs {
				msgs[i] = err.Error()
			}
			slices.Sort(msgs)
			out.Why += " (" + strings.Join(msgs, "; ") + ")"
		}
		return out
	}
	for id, a := range answers {
		if a.leader == out.Leader && a.term == term {
			out.Heard[id] = true
		}
	}
	return out
}

// forgetAllBut closes the connections to client URLs of no member.
func (h *Hearer) forgetAllBut(members []Member) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for u, c := range h.conns {
		if !slices.ContainsFunc(members, func(m Member) bool { return m.ClientURL == u }) {
			c.Close()
			delete(h.conns, u)
		}
	}
	for u := range h.silent {
		if !slices.ContainsFunc(members, func(m Member) bool { return m.ClientURL == u }) {
			delete(h.silent, u)
		}
	}
}

// status asks the member at a client URL for its status, within
// HearTimeout. Unlike the client's Status, it does not wait for a
// connection to become ready: a member whose port refuses (a process just
// killed) fails at once, not at the timeout, so that an observation
// under muNodes costs little when a voter is dead. It notes whether the
// member was silent: the bound, not the caller, ended the question.
func (h *Hearer) status(caller context.Context, clientURL string) (_ *pb.StatusResponse, err error) {
	ctx, cancel := context.WithTimeout(caller, HearTimeout)
	defer cancel()
	defer func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		switch {
		case err == nil:
			delete(h.silent, clientURL)
		case ctx.Err() != nil && caller.Err() == nil:
			h.silent[clientURL] = true
		}
	}()
	h.mu.Lock()
	conn, keep := h.conns[clientURL], !h.closed
	if conn == nil {
		var err error
		if conn, err = h.cli.Dial(clientURL); err != nil {
			h.mu.Unlock()
			return nil, err
		}
		if keep {
			h.conns[clientURL] = conn
		}
	}
	h.mu.Unlock()
	st, err := pb.NewMaintenanceClient(conn).Status(ctx, &pb.StatusRequest{}, grpc.WaitForReady(false))
	if err != nil || !keep {
		h.mu.Lock()
		if h.conns[clientURL] == conn {
			delete(h.conns, clientURL)
		}
		h.mu.Unlock()
		conn.Close()
	}
	if err != nil {
		return nil, rpctypes.Error(err)
	}
	return st, nil
}

// ReconfigTimeout bounds each membership change the curator asks of etcd
// (add, promote or remove a member), well under what a client waits for
// an answer: etcd retried a refusal within it (retryReconfig), and a
// change it could not make in that time is reported, not waited on.
const ReconfigTimeout = 5 * time.Second

// Bounded runs call with a context that ends after d. If that bound, and
// not ctx, ended it, the error says what did not finish within d.
func Bounded(ctx context.Context, d time.Duration, what string, call func(context.Context) error) error {
	bctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := call(bctx)
	if err != nil && ctx.Err() == nil && errors.Is(bctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%s: not done within %v: %w", what, d, err)
	}
	return err
}
