package node

import (
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"
)

// Reconnection at fleet scale. When a manager goes, every node whose
// session went through it notices at once; when the leader goes, every
// node does. An agent that tried again at once, and then every second,
// would have the managers spend their CPU on refusing it and on TLS
// handshakes, and the new leader would take the longest to hear the
// fleet exactly when it matters. So an agent spreads its attempts:
//
//   - after a session that was up ends, over the first half of a heartbeat
//     interval (the leader's down-after is several intervals: the node is
//     back long before it could be missed);
//   - after attempts that failed in a row, over a window that doubles with
//     each, from an eighth of an interval up to a whole one: a node that
//     cannot get through keeps trying about once an interval, never in
//     lockstep with the others (full jitter: uniform over the window);
//   - when a manager said when to come back (a RetryInfo detail on its
//     refusal, see curator's session admission), then, plus a tenth of it
//     at random; the manager's word is capped at maxRetryHint intervals so
//     that a manager that is wrong cannot park a node for long.

// maxRetryHint caps a manager's "come back in", in heartbeat intervals.
const maxRetryHint = 4

// minReconnectDelay is the least wait between two attempts after a
// failure, so that a node whose managers all refuse at once never spins.
const minReconnectDelay = 20 * time.Millisecond

// reconnectDelay is how long an agent waits before its next session
// attempt. failures counts the attempts that failed in a row (0: the last
// session was up, and just ended); interval is the heartbeat interval;
// hint is the wait a manager asked for (0: none); u is uniform in [0, 1).
func reconnectDelay(failures int, interval, hint time.Duration, u float64) time.Duration {
	u = min(max(u, 0), 1)
	if hint > 0 {
		hint = min(hint, maxRetryHint*interval)
		return hint + time.Duration(u*float64(hint/10))
	}
	if failures <= 0 {
		return time.Duration(u * float64(interval/2))
	}
	window := interval / 8
	for i := 1; i < failures && window < interval; i++ {
		window *= 2
	}
	window = min(window, interval)
	return max(minReconnectDelay, time.Duration(u*float64(window)))
}

// retryHint is the wait a manager asked for in its refusal err (a
// RetryInfo detail), or 0.
func retryHint(err error) time.Duration {
	if err == nil {
		return 0
	}
	st, ok := status.FromError(err)
	if !ok {
		return 0
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.RetryDelay != nil {
			return max(ri.RetryDelay.AsDuration(), 0)
		}
	}
	return 0
}
