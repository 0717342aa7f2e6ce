package node

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestReconnectDelay(t *testing.T) {
	const iv = 5 * time.Second
	for _, tc := range []struct {
		name     string
		failures int
		interval time.Duration
		hint     time.Duration
		u        float64
		want     time.Duration
	}{
		{"a session that was up: at once at the start of the spread", 0, iv, 0, 0, 0},
		{"a session that was up: spread over half an interval", 0, iv, 0, 0.5, 1250 * time.Millisecond},
		{"first failure: an eighth of an interval at most", 1, iv, 0, 0.999999, 625 * time.Millisecond},
		{"second failure: a quarter", 2, iv, 0, 0.999999, 1250 * time.Millisecond},
		{"third failure: a half", 3, iv, 0, 0.999999, 2500 * time.Millisecond},
		{"fourth failure: a whole interval", 4, iv, 0, 0.999999, 5 * time.Second},
		{"many failures: never past an interval", 50, iv, 0, 0.999999, 5 * time.Second},
		{"a failure never retries at once", 1, iv, 0, 0, minReconnectDelay},
		{"a short interval", 3, time.Second, 0, 0.5, 250 * time.Millisecond},
		{"the manager's come-back, and a tenth of it at random", 1, iv, 2 * time.Second, 0.5, 2100 * time.Millisecond},
		{"the come-back after a session that was up", 0, iv, 2 * time.Second, 0, 2 * time.Second},
		{"a come-back past four intervals is capped", 1, iv, time.Hour, 0, 20 * time.Second},
		{"u out of range is clamped", 4, iv, 0, 7, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := reconnectDelay(tc.failures, tc.interval, tc.hint, tc.u)
			// u just below 1, and float rounding: within 10 µs.
			if d := got - tc.want; d < -10*time.Microsecond || d > 10*time.Microsecond {
				t.Errorf("reconnectDelay(%d, %s, %s, %g) = %s, want %s", tc.failures, tc.interval, tc.hint, tc.u, got, tc.want)
			}
		})
	}
}

// TestReconnectDelaySpread: over many nodes, the attempts after a failure
// spread over the whole window, not a few values.
func TestReconnectDelaySpread(t *testing.T) {
	const iv = time.Second
	buckets := make([]int, 10)
	for i := range 1000 {
		d := reconnectDelay(4, iv, 0, float64(i)/1000)
		buckets[min(int(d*10/iv), 9)]++
	}
	for b, n := range buckets {
		if n < 80 || n > 120 {
			t.Errorf("bucket %d of the interval holds %d of 1000 attempts, want about 100: %v", b, n, buckets)
		}
	}
}

func TestRetryHint(t *testing.T) {
	withRetry := func(d time.Duration) error {
		st, err := status.New(codes.Unavailable, "busy").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
		if err != nil {
			t.Fatal(err)
		}
		return st.Err()
	}
	for _, tc := range []struct {
		name string
		err  error
		want time.Duration
	}{
		{"no error", nil, 0},
		{"not a status", errors.New("boom"), 0},
		{"a status without RetryInfo", status.Error(codes.Unavailable, "down"), 0},
		{"RetryInfo", withRetry(1500 * time.Millisecond), 1500 * time.Millisecond},
		{"a negative RetryInfo counts as none", withRetry(-time.Second), 0},
		{"wrapped", errors.Join(errors.New("manager x"), withRetry(time.Second)), time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := retryHint(tc.err); got != tc.want {
				t.Errorf("retryHint = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestRegisterDelay(t *testing.T) {
	for _, tc := range []struct {
		attempt int
		hint    time.Duration
		u       float64
		want    time.Duration
	}{
		{0, 0, 0, 200 * time.Millisecond},
		{0, 0, 0.5, 250 * time.Millisecond},
		{4, 0, 0, time.Second},
		{40, 0, 0, time.Second},
		{0, 3 * time.Second, 0, 3 * time.Second},
		{0, time.Minute, 0, 5 * time.Second},
	} {
		if got := registerDelay(tc.attempt, tc.hint, tc.u); got != tc.want {
			t.Errorf("registerDelay(%d, %s, %g) = %s, want %s", tc.attempt, tc.hint, tc.u, got, tc.want)
		}
	}
}
