package client

// Waiting out a cluster that cannot answer for a while: a leader hand-over
// (every manager answers "no curator leader is elected right now"), and,
// for the commands that follow a stream until Ctrl-C, every manager down.

import (
	"time"

	"github.com/curatorproject/curator/curator/spec"
	"google.golang.org/grpc/codes"
)

// isNoLeader says whether err is a manager's answer that no curator leader
// is elected right now.
func isNoLeader(err error) bool { return hasReason(err, codes.Unavailable, spec.NoLeaderReason) }

// maxWaitPause caps the pause between rounds while the client waits out a
// hand-over or for managers to come back.
const maxWaitPause = 2 * time.Second

// WithLeaderWait makes a call whose rounds all end with managers saying no
// curator leader is elected (a hand-over) go on for up to d in all, instead
// of failing after DefaultRounds; note (if not nil) is told once, when the
// wait starts, so that a person sees why the command takes a while. A lost
// quorum is not waited out: it says so at once.
func WithLeaderWait(d time.Duration, note func(string)) Option {
	return func(o *options) { o.leaderWait, o.waitNote = d, note }
}

// WithFollowUntilCancelled makes the watches (WatchNodes, WatchEvents)
// wait for managers to come back when none answers, until ctx ends,
// instead of giving up after DefaultRounds rounds; note (if not nil) is
// told when the wait starts and when a manager answers again.
func WithFollowUntilCancelled(note func(string)) Option {
	return func(o *options) { o.followForever, o.followNote = true, note }
}

// WithoutFollowUntilCancelled undoes WithFollowUntilCancelled: the watches
// give up after DefaultRounds rounds (a dashboard shows that instead).
func WithoutFollowUntilCancelled() Option {
	return func(o *options) { o.followForever, o.followNote = false, nil }
}

// keepWaitingForLeader says whether call should go on past its rounds:
// some manager said no leader is elected, none that the quorum is lost,
// and the wait is within its bound.
func (c *Client) keepWaitingForLeader(started time.Time, failed map[string]error) bool {
	if c.o.leaderWait <= 0 || time.Since(started) >= c.o.leaderWait {
		return false
	}
	noLeader := false
	for _, err := range failed {
		if isQuorumLost(err) {
			return false
		}
		noLeader = noLeader || isNoLeader(err)
	}
	return noLeader
}

func (o *options) note(note func(string), msg string) {
	if note != nil {
		note(msg)
	}
}
