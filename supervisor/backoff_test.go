package supervisor

import (
	"math"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

func TestNextBackoff(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		prev, initial, maximum, want time.Duration
	}{
		{0, 100 * ms, time.Second, 100 * ms},
		{100 * ms, 100 * ms, time.Second, 200 * ms},
		{400 * ms, 100 * ms, time.Second, 800 * ms},
		{600 * ms, 100 * ms, time.Second, time.Second},
		{time.Second, 100 * ms, time.Second, time.Second},
		{math.MaxInt64 / 2, ms, math.MaxInt64, math.MaxInt64}, // no overflow
		{100 * ms, 100 * ms, 100 * ms, 100 * ms},
	} {
		if got := nextBackoff(tc.prev, tc.initial, tc.maximum); got != tc.want {
			t.Errorf("nextBackoff(%v, %v, %v) = %v, want %v", tc.prev, tc.initial, tc.maximum, got, tc.want)
		}
	}
}

func TestJittered(t *testing.T) {
	for _, tc := range []struct {
		d        time.Duration
		fraction float64
		r        float64
		want     time.Duration
	}{
		{time.Second, 0, 0.9, time.Second},
		{time.Second, 0.2, 0, time.Second},
		{time.Second, 0.2, 0.5, 900 * time.Millisecond},
		{time.Second, 0.5, 0.5, 750 * time.Millisecond},
	} {
		if got := jittered(tc.d, tc.fraction, tc.r); got != tc.want {
			t.Errorf("jittered(%v, %v, %v) = %v, want %v", tc.d, tc.fraction, tc.r, got, tc.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opt     Option
		wantErr string // "" if valid
	}{
		{"defaults", func(*config) {}, ""},
		{"zero jitter", WithJitter(0), ""},
		{"zero reset", WithBackoffReset(0), ""},
		{"nil logger", WithLogger(nil), "logger is nil"},
		{"nil clock", WithClock(nil), "clock is nil"},
		{"zero initial", WithBackoff(0, time.Second), "initial backoff 0s is not positive"},
		{"max below initial", WithBackoff(2*time.Second, time.Second), "maximum backoff 1s is less than initial backoff 2s"},
		{"negative reset", WithBackoffReset(-time.Second), "backoff reset period -1s is negative"},
		{"jitter of one", WithJitter(1), "jitter 1 is not in [0, 1)"},
		{"negative jitter", WithJitter(-0.1), "jitter -0.1 is not in [0, 1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaultConfig()
			tc.opt(&cfg)
			err := cfg.validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("validate: %v", err)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Errorf("validate = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestNewPanicsOnInvalidConfig(t *testing.T) {
	defer func() {
		v := recover()
		msg, _ := v.(string)
		if !strings.Contains(msg, "jitter") {
			t.Errorf("New panicked with %v, want a message about jitter", v)
		}
	}()
	New(t.Context(), blockUntilCancelled, WithJitter(2), WithLogger(zap.NewNop()))
}
