// Package backoff is the one policy by which the curator's loops wait
// before they try again something that failed: how long the first wait
// is, how it grows (by a step, or by a factor) and its ceiling. A loop
// states its policy as one value next to its reason, and asks it for the
// wait after each failure; the loop keeps what is its own (a manager's
// "come back in", jitter, when to give up).
//
// A Policy is a pure function of the attempt, so the waits are tested
// with tables and without sleeping.
package backoff

import "time"

// Policy says how long to wait after each failed attempt: Initial after
// the first, then Step more and Factor times as much after each further
// one, never more than Max.
type Policy struct {
	// Initial is the wait after the first failure.
	Initial time.Duration
	// Step is added to the wait after each further failure.
	Step time.Duration
	// Factor multiplies the wait after each further failure (after Step
	// is added); 0 means 1, a wait that does not grow by a factor.
	Factor float64
	// Max is the longest wait; 0 means none.
	Max time.Duration
}

// Wait is the wait after failure n, counted from 0 (the first failure).
func (p Policy) Wait(n int) time.Duration {
	d := p.Initial
	for i := 0; i < n; i++ {
		next := p.Next(d)
		if next == d {
			break // at the ceiling, or not growing
		}
		d = next
	}
	return p.clamp(d)
}

// Next is the wait after the one that was prev; with prev 0 (no failure
// yet, or the loop's memory was reset) it is Initial. Loops that keep
// their last wait (and reset it after a success) use it.
func (p Policy) Next(prev time.Duration) time.Duration {
	if prev <= 0 {
		return p.clamp(p.Initial)
	}
	if p.Max > 0 && prev >= p.Max {
		return p.Max
	}
	f := p.Factor
	if f == 0 {
		f = 1
	}
	next := (float64(prev) + float64(p.Step)) * f
	if p.Max > 0 && next >= float64(p.Max) {
		return p.Max
	}
	return p.clamp(time.Duration(next))
}

func (p Policy) clamp(d time.Duration) time.Duration {
	if p.Max > 0 && d > p.Max {
		return p.Max
	}
	return d
}
