package curator

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/curatorproject/curator/curator/spec"
)

func TestDecideAdmission(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := time.Millisecond
	type step struct {
		at      time.Duration // after t0
		ok      bool
		wait    time.Duration
		comment string
	}
	for _, tc := range []struct {
		name  string
		rate  float64
		burst int
		steps []step
	}{
		{"a burst is admitted at once, then one per emission interval", 100, 2, []step{
			{0, true, 0, "bucket full"},
			{0, true, 0, "burst"},
			{0, true, 0, "burst"},
			{0, false, 10 * ms, "past the burst: the next slot"},
			{0, false, 20 * ms, "the next refused queues behind"},
			{0, false, 30 * ms, ""},
			{10 * ms, true, 0, "a token again"},
		}},
		{"refused set-ups come back at their slots and are admitted", 10, 0, []step{
			{0, true, 0, ""},
			{0, false, 100 * ms, ""},
			{0, false, 200 * ms, ""},
			{100 * ms, true, 0, "the first refused, at its slot"},
			{200 * ms, true, 0, "the second, at its"},
		}},
		{"an idle gate forgets its past", 10, 0, []step{
			{0, true, 0, ""},
			{0, false, 100 * ms, ""},
			{time.Minute, true, 0, ""},
			{time.Minute, false, 100 * ms, "the queue starts afresh"},
		}},
		{"a rate below one a second counts as one", 0, 0, []step{
			{0, true, 0, ""},
			{0, false, time.Second, ""},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s admissionState
			for i, st := range tc.steps {
				ok, wait, next := decideAdmission(s, t0.Add(st.at), tc.rate, tc.burst)
				if ok != st.ok || wait != st.wait {
					t.Fatalf("step %d (%s, at +%s): ok %v wait %s, want ok %v wait %s", i, st.comment, st.at, ok, wait, st.ok, st.wait)
				}
				s = next
			}
		})
	}
}

// TestDecideAdmissionStorm: a storm of set-ups, each refused one coming
// back when told, is admitted at the gate's rate, and no set-up is told
// to wait longer than the storm takes to drain.
func TestDecideAdmissionStorm(t *testing.T) {
	const (
		nodes = 10000
		rate  = 1000.0
		burst = 100
	)
	t0 := time.Unix(1000, 0)
	var s admissionState
	var admitted []time.Duration
	var longest time.Duration
	for range nodes {
		at := time.Duration(0)
		for {
			ok, wait, next := decideAdmission(s, t0.Add(at), rate, burst)
			s = next
			if ok {
				admitted = append(admitted, at)
				break
			}
			longest = max(longest, wait)
			at += wait
		}
	}
	last := admitted[len(admitted)-1]
	drain := time.Duration(float64(nodes-burst-1) / rate * float64(time.Second))
	if last < drain-time.Millisecond || last > drain+time.Second/rate*2 {
		t.Errorf("the last of %d set-ups admitted after %s, want about %s (%g/s)", nodes, last, drain, rate)
	}
	if longest > drain+10*time.Millisecond {
		t.Errorf("a set-up was told to wait %s, longer than the drain %s", longest, drain)
	}
}

func TestSessionGateRefusal(t *testing.T) {
	g := newSessionGate(1, 0)
	now := time.Unix(1000, 0)
	if err := g.admit(now); err != nil {
		t.Fatalf("first set-up refused: %v", err)
	}
	err := g.admit(now)
	if !errors.Is(err, spec.ErrSessionsPaced) {
		t.Fatalf("second set-up: %v, want ErrSessionsPaced", err)
	}
	st := status.Convert(toStatus(err))
	if st.Code() != codes.Unavailable {
		t.Errorf("code %s, want Unavailable", st.Code())
	}
	reason, retry := statusMarks(st)
	if reason != spec.SessionsPacedReason || retry != time.Second {
		t.Errorf("details: reason %q, retry %s; want %q, 1s (%v)", reason, retry, spec.SessionsPacedReason, st.Details())
	}
	if w := g.later(now); w != 2*time.Second {
		t.Errorf("later: %s, want 2s (behind the refused set-up's slot)", w)
	}
}

// statusMarks are the reason (ErrorInfo) and the come-back (RetryInfo) a
// status carries, if any.
func statusMarks(st *status.Status) (reason string, retry time.Duration) {
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			reason = d.Reason
		case *errdetails.RetryInfo:
			retry = d.RetryDelay.AsDuration()
		}
	}
	return reason, retry
}
