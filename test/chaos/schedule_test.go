package chaos

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// A schedule is the faults and operations of one run, drawn from a seed
// before the run starts: the same seed gives the same schedule. What each
// step hits is chosen when it runs, from the cluster as it is then (the
// step's pick indexes the candidates, sorted by name), so a replay hits the
// same kinds of targets in the same order.

type stepKind int

const (
	// stepKill kills (-9) a ready node's process: a manager only while
	// the others keep a majority of the voters.
	stepKill stepKind = iota + 1
	// stepKillLeader kills the curator leader's process, under the same
	// condition.
	stepKillLeader
	// stepStop freezes a node's process (SIGSTOP) for the step's hold,
	// then continues it (SIGCONT); other steps run meanwhile.
	stepStop
	// stepCut cuts a node's machine off the network for the step's hold,
	// then joins it again (the Docker variant disconnects its container;
	// processes, which share the loopback, are frozen instead). Same
	// condition as a kill.
	stepCut
	// stepReboot kills (-9) a ready node's process and starts it again
	// at once from its data dir, through the process provider: a machine
	// that reboots. Same condition as a kill.
	stepReboot
	// stepScaleWorkers commits the workers group with a size of 3 to 5.
	stepScaleWorkers
	// stepRollWorkers and stepRollManagers commit a new template version
	// of the group: a rollout.
	stepRollWorkers
	stepRollManagers
	// stepBadWorkers and stepBadManagers commit a bad template to the
	// group (args: [--no-such-flag]): its new machines exit at once, the
	// rollout fails and rolls back by itself, and the old machines serve
	// throughout. The group's other commits are skipped until it is back.
	stepBadWorkers
	stepBadManagers
	// stepFreezeWorkers and stepFreezeManagers freeze (SIGSTOP, or
	// docker pause) more of the group's ready nodes than its
	// max_unhealthy, for longer than replace_after past down-after (the
	// step's hold: freezeHold), then continue them: the repair ceiling
	// holds, nothing of the group is destroyed, and it heals by itself.
	// Managers only while the healthy voters left keep a majority.
	stepFreezeWorkers
	stepFreezeManagers
	// stepPowerLoss kills (-9) every process of the cluster in one go,
	// dev and every agent, as a power loss would, then starts dev again
	// on its dir as an operator would (`curator dev --dir DIR`, no other
	// flag): nothing may be lost. Skipped while another fault holds a
	// node or a group, and where the variant's dev does not restart
	// (Docker).
	stepPowerLoss
	// stepDelay restarts a manager (a voter, under the same condition
	// as a kill) with delays armed at chosen fault points
	// (CURATOR_FAULT_DELAY, the step's pick choosing which: a sleep
	// between two writes of one action, a slow apply of the node view,
	// late answers, slow watches), for three times the step's hold,
	// then restarts it again without them.
	stepDelay
	// stepSkew restarts a manager the same way with its curator's clock
	// ahead or behind the host's by 1–4 s (CURATOR_FAULT_CLOCK_SKEW).
	stepSkew
	// stepStarve starves the host of CPU: three processes that burn a
	// core each (testenv.Busy) for twice the step's hold.
	stepStarve
	// stepPartition cuts a manager off from every other node, both ways,
	// for the step's hold, then heals it: on processes the nftables
	// harness (internal/netfault, as root; skipped, saying why,
	// elsewhere), on Docker the container disconnected. Same condition
	// as a kill.
	stepPartition
)

func (k stepKind) String() string {
	switch k {
	case stepKill:
		return "kill"
	case stepKillLeader:
		return "kill-leader"
	case stepStop:
		return "stop"
	case stepCut:
		return "cut"
	case stepReboot:
		return "reboot"
	case stepScaleWorkers:
		return "scale-workers"
	case stepRollWorkers:
		return "roll-workers"
	case stepRollManagers:
		return "roll-managers"
	case stepBadWorkers:
		return "bad-workers"
	case stepBadManagers:
		return "bad-managers"
	case stepFreezeWorkers:
		return "freeze-workers"
	case stepFreezeManagers:
		return "freeze-managers"
	case stepPowerLoss:
		return "power-loss"
	case stepDelay:
		return "delay"
	case stepSkew:
		return "skew"
	case stepStarve:
		return "starve"
	case stepPartition:
		return "partition"
	}
	return fmt.Sprintf("step(%d)", int(k))
}

// weights: how often each kind is drawn. Faults outnumber operations.
var weights = []struct {
	kind   stepKind
	weight int
}{
	{stepKill, 3},
	{stepKillLeader, 2},
	{stepStop, 2},
	{stepCut, 2},
	{stepReboot, 2},
	{stepScaleWorkers, 1},
	{stepRollWorkers, 1},
	{stepRollManagers, 1},
	{stepBadWorkers, 1},
	{stepBadManagers, 1},
	{stepFreezeWorkers, 1},
	{stepFreezeManagers, 1},
	{stepPowerLoss, 1},
	{stepDelay, 2},
	{stepSkew, 1},
	{stepStarve, 1},
	{stepPartition, 2},
}

// group is the group a group-wide step hits or commits to ("" for a
// step on one node).
func (k stepKind) group() string {
	switch k {
	case stepScaleWorkers, stepRollWorkers, stepBadWorkers, stepFreezeWorkers:
		return "workers"
	case stepRollManagers, stepBadManagers, stepFreezeManagers:
		return "managers"
	}
	return ""
}

// freeze says whether the step is a group-wide freeze.
func (k stepKind) freeze() bool { return k == stepFreezeWorkers || k == stepFreezeManagers }

const (
	// replaceAfter is the groups' replace_after in the suite (the
	// default is a minute): a group-wide freeze outlasts it in seconds.
	// A single stop (2–8 s, the node down after downAfter) stays short
	// of it.
	replaceAfter = 10 * time.Second
	// downAfter is the cluster's --down-after (dev's default).
	downAfter = 5 * time.Second
	// freezeFloor is the shortest group-wide freeze: the nodes down after
	// downAfter, then replace_after twice over, so that the group loop
	// has found them due for replacement over several ticks (and a
	// leader change) before they are let go.
	freezeFloor = downAfter + 2*replaceAfter
)

// freezeHold is how long a group-wide freeze lasts, from the hold drawn
// (2–8 s): freezeFloor and up to 6 s more.
func freezeHold(drawn time.Duration) time.Duration { return freezeFloor + drawn - 2*time.Second }

// step is one entry of a schedule.
type step struct {
	Kind stepKind
	// Pick chooses the target among the candidates, or the size.
	Pick uint32
	// Hold is how long a stop, a cut or a group-wide freeze lasts.
	Hold time.Duration
	// Gap is the pause before the next step.
	Gap time.Duration
}

func (s step) String() string {
	switch s.Kind {
	case stepStop, stepCut, stepFreezeWorkers, stepFreezeManagers, stepStarve, stepPartition:
		return fmt.Sprintf("%s pick %d hold %s, then %s", s.Kind, s.Pick, s.Hold, s.Gap)
	case stepDelay:
		return fmt.Sprintf("%s pick %d (%s) hold %s, then %s", s.Kind, s.Pick, delayPreset(s.Pick), s.Hold, s.Gap)
	case stepSkew:
		return fmt.Sprintf("%s pick %d (%s) hold %s, then %s", s.Kind, s.Pick, clockSkew(s.Pick), s.Hold, s.Gap)
	case stepScaleWorkers:
		return fmt.Sprintf("%s to %d, then %s", s.Kind, workersSize(s.Pick), s.Gap)
	}
	return fmt.Sprintf("%s pick %d, then %s", s.Kind, s.Pick, s.Gap)
}

// workersSize is the size a scale step commits.
func workersSize(pick uint32) uint32 { return 3 + pick%3 }

// schedule draws n steps from seed.
func schedule(seed uint64, n int) []step {
	rng := rand.New(rand.NewPCG(seed, 0x63757261746f72)) // "curator"
	total := 0
	for _, w := range weights {
		total += w.weight
	}
	steps := make([]step, 0, n)
	for range n {
		r := rng.IntN(total)
		var kind stepKind
		for _, w := range weights {
			if r < w.weight {
				kind = w.kind
				break
			}
			r -= w.weight
		}
		s := step{
			Kind: kind,
			Pick: rng.Uint32(),
			Hold: time.Duration(2000+rng.IntN(6000)) * time.Millisecond,
			Gap:  time.Duration(500+rng.IntN(2500)) * time.Millisecond,
		}
		switch {
		case kind.freeze():
			s.Hold = freezeHold(s.Hold)
		case kind == stepDelay || kind == stepSkew:
			s.Hold *= 3
		case kind == stepStarve:
			s.Hold *= 2
		}
		steps = append(steps, s)
	}
	return steps
}
