package supervisor

import (
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// Defaults for a Supervisor's configuration.
const (
	DefaultBackoffInitial = 100 * time.Millisecond
	DefaultBackoffMax     = 10 * time.Second
	DefaultBackoffReset   = 10 * time.Second
	DefaultJitter         = 0.2
)

// config is everything a Supervisor can be told. Defaults live in
// defaultConfig, checks in validate; options only fill it.
type config struct {
	logger         *zap.Logger
	clock          Clock
	backoffInitial time.Duration
	backoffMax     time.Duration
	backoffReset   time.Duration
	jitter         float64
	propagatePanic bool
}

func defaultConfig() config {
	return config{
		logger:         zap.NewNop(),
		clock:          realClock{},
		backoffInitial: DefaultBackoffInitial,
		backoffMax:     DefaultBackoffMax,
		backoffReset:   DefaultBackoffReset,
		jitter:         DefaultJitter,
	}
}

func (c config) validate() error {
	var errs []error
	if c.logger == nil {
		errs = append(errs, errors.New("logger is nil"))
	}
	if c.clock == nil {
		errs = append(errs, errors.New("clock is nil"))
	}
	if c.backoffInitial <= 0 {
		errs = append(errs, fmt.Errorf("initial backoff %v is not positive", c.backoffInitial))
	}
	if c.backoffMax < c.backoffInitial {
		errs = append(errs, fmt.Errorf("maximum backoff %v is less than initial backoff %v", c.backoffMax, c.backoffInitial))
	}
	if c.backoffReset < 0 {
		errs = append(errs, fmt.Errorf("backoff reset period %v is negative", c.backoffReset))
	}
	if c.jitter < 0 || c.jitter >= 1 {
		errs = append(errs, fmt.Errorf("jitter %v is not in [0, 1)", c.jitter))
	}
	return errors.Join(errs...)
}

// An Option changes how a Supervisor runs.
type Option func(*config)

// WithLogger sets the base logger. Every runnable logs through
// base.Named(its dotted name). The default discards everything.
func WithLogger(base *zap.Logger) Option {
	return func(c *config) { c.logger = base }
}

// WithBackoff sets the wait before a failed runnable's first restart
// (initial) and the cap the wait doubles up to (maximum).
// The defaults are DefaultBackoffInitial and DefaultBackoffMax.
func WithBackoff(initial, maximum time.Duration) Option {
	return func(c *config) {
		c.backoffInitial = initial
		c.backoffMax = maximum
	}
}

// WithBackoffReset sets how long a runnable must have been healthy before it
// failed for its backoff to start over from the initial wait.
// The default is DefaultBackoffReset.
func WithBackoffReset(healthyFor time.Duration) Option {
	return func(c *config) { c.backoffReset = healthyFor }
}

// WithJitter sets the largest fraction, in [0, 1), by which a backoff wait is
// randomly shortened. Zero makes waits exact. The default is DefaultJitter.
func WithJitter(fraction float64) Option {
	return func(c *config) { c.jitter = fraction }
}

// WithPropagatePanic leaves a runnable's panic unrecovered, so it crashes the
// process with its own stack trace instead of being treated as a failure.
// Meant for tests and local debugging.
func WithPropagatePanic() Option {
	return func(c *config) { c.propagatePanic = true }
}

// WithClock sets the clock the supervisor reads time and waits through.
func WithClock(clock Clock) Option {
	return func(c *config) { c.clock = clock }
}
