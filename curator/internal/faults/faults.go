// Package faults holds curator's fault points: named places in the
// leader's changes and in the API where a test makes the process die or
// wait (a binary built with -tags faults: the point named in
// CURATOR_FAULT, or given a delay in CURATOR_FAULT_DELAY), or holds a
// change in flight (a pause point, in every build). A faults build also
// runs its curator's clock off by CURATOR_FAULT_CLOCK_SKEW (Now).
package faults

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Env names the fault points a binary built with -tags faults dies
// at (comma-separated).
const Env = "CURATOR_FAULT"

// DelayEnv gives fault points a delay in a binary built with -tags
// faults: "POINT=DURATION,…" (rollout/after-provision=2s,api/before-reply=300ms).
// The process sleeps that long each time it passes the point. An unknown
// point or a bad duration makes the process refuse to start.
const DelayEnv = "CURATOR_FAULT_DELAY"

// DelayDirEnv names a directory where a test gives a running process
// delays, in a binary built with -tags faults: the file named by the
// process's pid holds what DelayEnv would ("" or no file: none), read
// again at most every DelayDirPoll; a bad content is said on stderr and
// gives no delay. Unlike the other variables it reaches the machines a
// leader makes (each of which has a pid of its own): the chaos suite
// sets it for a whole cluster and arms the leader of the moment.
const DelayDirEnv = "CURATOR_FAULT_DELAY_DIR"

// DelayDirPoll is how often a process reads its file in DelayDirEnv.
const DelayDirPoll = 100 * time.Millisecond

// ClockSkewEnv runs the curator's clock (Config.Now: heartbeats,
// down-after, leases' doubt, rollout deadlines, event times) ahead
// (+3s) or behind (-3s) of the host's, in a binary built with -tags
// faults. TLS and etcd keep the host's clock.
const ClockSkewEnv = "CURATOR_FAULT_CLOCK_SKEW"

// The named fault points (docs/architecture/fault-points.md).
const (
	PromoteAfterMemberAdd   = "promote/after-member-add"
	DemoteAfterMemberRemove = "demote/after-member-remove"
	RolloutAfterDestroy     = "rollout/after-destroy"
	RolloutAfterProvision   = "rollout/after-provision"
	// RolloutSurgeLearner: the leader sees a consensus group's new
	// member, made by a rollout, as an etcd learner.
	RolloutSurgeLearner = "rollout/after-surge-learner"
	// RolloutAfterDemote: a rollout demoted an old manager.
	RolloutAfterDemote = "rollout/after-demote"
	// RolloutAfterRollBack: a failed rollout's record was turned
	// into its rollback, the group back on its previous template.
	RolloutAfterRollBack = "rollout/after-rollback"
	// SwarmAfterPromote: a node's Swarm worker was promoted to
	// manager, and nothing else of its promotion done yet.
	SwarmAfterPromote = "swarm/after-promote"
	// SwarmAfterDemote: a demoting node's Swarm manager was demoted
	// to worker, and its etcd member not yet removed.
	SwarmAfterDemote = "swarm/after-demote"
	// APIBeforeReply: a unary call was served (or forwarded and
	// answered), and its answer is about to leave this manager: a delay
	// here is an answer late after its write took effect.
	APIBeforeReply = "api/before-reply"
	// WatchBeforeSend: a watch (nodes or events) is about to send a
	// batch of changes to its client.
	WatchBeforeSend = "watch/before-send"
	// RegistryBeforeApply: the registry view (the node records a
	// manager serves from) has a batch of changes from etcd and is about
	// to apply it: a slow apply.
	RegistryBeforeApply = "registry/before-apply"
)

// ReadStale500ms is a read-side fault point: armed (Armed), the node
// reads of the management API (node ls, node inspect) are served from a
// view of the node records 500 ms old, a stale read that the history
// checker must catch (test/history). It does not make the process exit.
const ReadStale500ms = "read/stale-500ms"

// BeforeMemberRemove: a demotion or a removal passed the quorum
// guard and is about to take a member out of etcd (its leadership moved
// off first). A pause point (Pause): a test holds the change there,
// with muNodes held, to show that nothing else waits on it. A delay
// (DelayEnv) holds it there too.
const BeforeMemberRemove = "membership/before-member-remove"

// Points are the points a delay may be given at: every point the
// process passes (Point, Pause).
var Points = []string{
	PromoteAfterMemberAdd, DemoteAfterMemberRemove,
	RolloutAfterDestroy, RolloutAfterProvision, RolloutSurgeLearner, RolloutAfterDemote, RolloutAfterRollBack,
	SwarmAfterPromote, SwarmAfterDemote,
	APIBeforeReply, WatchBeforeSend, RegistryBeforeApply,
	BeforeMemberRemove,
}

// ParseDelays reads a DelayEnv value: "POINT=DURATION" pairs, separated
// by commas; "" is none. Each point must be one of Points, once, and its
// delay a positive duration of at most a minute.
func ParseDelays(v string) (map[string]time.Duration, error) {
	delays := map[string]time.Duration{}
	for _, pair := range strings.Split(v, ",") {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		point, d, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, fmt.Errorf("%s: %q is not POINT=DURATION", DelayEnv, pair)
		}
		if !slices.Contains(Points, point) {
			return nil, fmt.Errorf("%s: no fault point %q (the points: %s)", DelayEnv, point, strings.Join(Points, ", "))
		}
		if _, dup := delays[point]; dup {
			return nil, fmt.Errorf("%s: %s given twice", DelayEnv, point)
		}
		dur, err := time.ParseDuration(d)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", DelayEnv, point, err)
		}
		if dur <= 0 || dur > time.Minute {
			return nil, fmt.Errorf("%s: %s=%s: want a delay above 0 and at most a minute", DelayEnv, point, d)
		}
		delays[point] = dur
	}
	return delays, nil
}

// ParseClockSkew reads a ClockSkewEnv value: a signed duration ("+3s",
// "-1500ms"), at most an hour either way; "" is none.
func ParseClockSkew(v string) (time.Duration, error) {
	if v = strings.TrimSpace(v); v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", ClockSkewEnv, err)
	}
	if d < -time.Hour || d > time.Hour {
		return 0, fmt.Errorf("%s=%s: want a skew of at most an hour either way", ClockSkewEnv, v)
	}
	return d, nil
}

// paused, set by a test (SetPaused), is called at each pause point with
// its name, and may block there.
var paused atomic.Pointer[func(name string)]

// SetPaused has f called at each pause point with its name (nil: none).
// Only tests set it.
func SetPaused(f func(name string)) {
	if f == nil {
		paused.Store(nil)
		return
	}
	paused.Store(&f)
}

// Pause is a point at which a test can hold a change in flight; without
// one it does nothing, in every build (but for a delay given it in a
// faults build).
func Pause(name string) {
	delay(name)
	if f := paused.Load(); f != nil {
		(*f)(name)
	}
}
