package backoff

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestWait(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		name string
		p    Policy
		want []time.Duration // after failures 0, 1, 2, ...
	}{
		{"doubling to a ceiling", Policy{Initial: 100 * ms, Factor: 2, Max: 2 * time.Second},
			[]time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 2 * time.Second, 2 * time.Second}},
		{"a step to a ceiling", Policy{Initial: 200 * ms, Step: 200 * ms, Max: time.Second},
			[]time.Duration{200 * ms, 400 * ms, 600 * ms, 800 * ms, time.Second, time.Second}},
		{"a step without a ceiling", Policy{Initial: 50 * ms, Step: 50 * ms},
			[]time.Duration{50 * ms, 100 * ms, 150 * ms, 200 * ms}},
		{"constant", Policy{Initial: 300 * ms},
			[]time.Duration{300 * ms, 300 * ms, 300 * ms}},
		{"an initial wait above the ceiling", Policy{Initial: time.Second, Factor: 2, Max: 500 * ms},
			[]time.Duration{500 * ms, 500 * ms}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []time.Duration
			for n := range tc.want {
				got = append(got, tc.p.Wait(n))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNext(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		p          Policy
		prev, want time.Duration
	}{
		{Policy{Initial: 100 * ms, Factor: 2, Max: time.Second}, 0, 100 * ms},
		{Policy{Initial: 100 * ms, Factor: 2, Max: time.Second}, 400 * ms, 800 * ms},
		{Policy{Initial: 100 * ms, Factor: 2, Max: time.Second}, 600 * ms, time.Second},
		{Policy{Initial: 100 * ms, Factor: 2, Max: time.Second}, 2 * time.Second, time.Second},
		{Policy{Initial: ms, Factor: 2, Max: math.MaxInt64}, math.MaxInt64 / 2, math.MaxInt64}, // no overflow
		{Policy{Initial: 200 * ms, Step: 200 * ms, Max: time.Second}, 400 * ms, 600 * ms},
	} {
		if got := tc.p.Next(tc.prev); got != tc.want {
			t.Errorf("%+v.Next(%v) = %v, want %v", tc.p, tc.prev, got, tc.want)
		}
	}
}
