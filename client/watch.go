package client

// The management API's watches, kept open across failovers: a stream that
// ends (its leader stepped down, its manager went away) is opened again on
// the next manager that answers, WatchEvents from the revision it got to,
// so that the caller sees every event once.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/curatorproject/curator/internal/backoff"
	pb "github.com/curatorproject/curator/proto"
)

// reopenPause is the least time between two streams of one watch, so that
// a manager that answers and at once ends the stream is not called in a
// tight loop.
const reopenPause = 100 * time.Millisecond

// callerError carries the error of the caller's fn out of a watch, which
// then ends instead of trying the next manager.
type callerError struct{ err error }

func (e callerError) Error() string { return e.err.Error() }

// WatchNodes calls fn with each answer of the leader's node watch: first
// every node (Snapshot), then the changes. After a failover the watch
// starts again on another manager, with a new snapshot. It returns when
// ctx ends (its error), when fn returns an error (that error), or when no
// manager has answered through DefaultRounds rounds.
func (c *Client) WatchNodes(ctx context.Context, fn func(*pb.WatchNodesResponse) error) error {
	return c.follow(ctx, func(ctx context.Context, m pb.ManagementClient, answered func()) error {
		s, err := m.WatchNodes(ctx, &pb.WatchNodesRequest{})
		if err != nil {
			return err
		}
		return receive(s, answered, fn)
	})
}

// WatchEvents calls fn with the events recorded after etcd revision after
// (with after 0: the newest backlog events, then those to come), as they
// are recorded, oldest first. After a failover it resumes on another
// manager from the revision of the last answer, so fn sees each event once
// and none is skipped (but those trimmed from the bounded history while no
// manager answered). It returns as WatchNodes does.
func (c *Client) WatchEvents(ctx context.Context, after int64, backlog uint32, fn func(*pb.WatchEventsResponse) error) error {
	return c.WatchEventsFiltered(ctx, after, backlog, nil, fn)
}

// WatchEventsFiltered is WatchEvents of the events filter selects (nil:
// all), the backlog being the newest of those; the leader selects them.
func (c *Client) WatchEventsFiltered(ctx context.Context, after int64, backlog uint32, filter *pb.EventFilter, fn func(*pb.WatchEventsResponse) error) error {
	if after < 0 {
		return fmt.Errorf("watch events: after revision %d is negative", after)
	}
	return c.follow(ctx, func(ctx context.Context, m pb.ManagementClient, answered func()) error {
		req := &pb.WatchEventsRequest{AfterRevision: after, Backlog: backlog, Filter: filter}
		if after > 0 {
			req.Backlog = 0
		}
		s, err := m.WatchEvents(ctx, req)
		if err != nil {
			return err
		}
		return receive(s, answered, func(resp *pb.WatchEventsResponse) error {
			after = max(after, resp.GetRevision())
			return fn(resp)
		})
	})
}

// receive hands each answer of stream s to fn, after answered, until the
// stream ends (its error) or fn fails (its error, as the caller's).
func receive[T any](s interface{ Recv() (T, error) }, answered func(), fn func(T) error) error {
	for {
		resp, err := s.Recv()
		if err != nil {
			return err
		}
		answered()
		if err := fn(resp); err != nil {
			return callerError{err}
		}
	}
}

// follow runs stream against one manager after another for as long as ctx
// lasts. stream calls answered for each answer it gets; the first must come
// within the attempt timeout. A stream that ends, or a manager that cannot
// be reached, sends it to the next manager (the one that answered last
// first); a manager that answers with any other error ends the watch with
// it. It gives up once DefaultRounds rounds of the managers have gone by
// without an answer.
func (c *Client) follow(ctx context.Context, stream func(context.Context, pb.ManagementClient, func()) error) error {
	failed := map[string]error{}
	var order []string
	misses := 0
	// pauses are the waits after each round of the managers in which none
	// answered (round counts them); once the rounds are used up and the
	// watch waits for a manager to come back, they stop growing at
	// maxWaitPause.
	pauses := backoff.Policy{Initial: c.o.roundPause, Factor: 2}
	round := 0
	waiting := false // for managers to come back (WithFollowUntilCancelled)
	for {
		addrs := c.Managers()
		if len(addrs) == 0 {
			return fmt.Errorf("%w: the client knows no manager", ErrNoManager)
		}
		addr := addrs[misses%len(addrs)]
		got, err := c.followOn(ctx, addr, stream, func() {
			if waiting {
				c.o.note(c.o.followNote, "manager "+addr+" answers again: following on")
				waiting = false
			}
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ce callerError
		if errors.As(err, &ce) {
			return ce.err
		}
		if err != nil && !isUnreachable(err) && !errors.Is(err, io.EOF) {
			return err
		}
		if got {
			c.answered(addr)
			misses, round, pauses.Max = 0, 0, 0
			clear(failed)
			order = order[:0]
		} else {
			c.o.lg.Debug("manager did not answer the watch", zap.String("manager", addr), zap.Error(err))
			if _, ok := failed[addr]; !ok {
				order = append(order, addr)
			}
			failed[addr] = cmpErr(err)
			misses++
			if misses >= c.o.rounds*len(addrs) {
				if !c.o.followForever {
					return c.giveUp(nil, order, failed)
				}
				if !waiting {
					c.o.note(c.o.followNote, fmt.Sprintf("no manager answers (%v): waiting for one to come back; Ctrl-C to stop", c.giveUp(nil, order, failed)))
					waiting = true
				}
				pauses.Max = maxWaitPause
			}
		}
		wait := reopenPause
		if !got && misses%len(addrs) == 0 {
			wait = pauses.Wait(round)
			round++
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// followOn runs stream once against addr and says whether it got an
// answer; first is called at the first.
func (c *Client) followOn(ctx context.Context, addr string, stream func(context.Context, pb.ManagementClient, func()) error, first func()) (got bool, err error) {
	conn, err := c.conn(addr)
	if err != nil {
		return false, status.Error(codes.Unavailable, err.Error())
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A stream may stay open for days: the managers are asked for again
	// while it runs, so that when addr goes, the follow knows where to go.
	refreshed := make(chan struct{})
	go func() {
		defer close(refreshed)
		tick := time.NewTicker(c.o.managersRefresh)
		defer tick.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-tick.C:
				c.refresh(sctx, addr)
			}
		}
	}()
	defer func() { cancel(); <-refreshed }()
	// Until the first answer, the attempt timeout holds.
	var timedOut atomic.Bool
	timer := time.AfterFunc(c.o.attemptTimeout, func() { timedOut.Store(true); cancel() })
	defer timer.Stop()
	err = stream(sctx, pb.NewManagementClient(conn), func() {
		if !got {
			got = true
			timer.Stop()
			first()
		}
	})
	if isUnreachable(err) {
		c.retire(addr, conn)
	}
	if err != nil && ctx.Err() == nil && sctx.Err() != nil && timedOut.Load() {
		c.retire(addr, conn)
		return got, status.Errorf(codes.DeadlineExceeded, "no answer within %v", c.o.attemptTimeout)
	}
	return got, err
}

// cmpErr is err, or io.EOF for a stream that ended without one.
func cmpErr(err error) error {
	if err == nil {
		return io.EOF
	}
	return err
}
