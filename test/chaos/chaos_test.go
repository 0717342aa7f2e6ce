// Package chaos runs a cluster of real curator processes through a seeded
// random schedule of faults (kill -9 of any node and of the leader,
// SIGSTOP/SIGCONT, restarts, more of a group frozen than its repair
// ceiling, every process killed at once) while rollouts, bad templates and scaling run, with a monitor
// that checks the cluster's invariants the whole time and once the faults
// stop. See README.md in this directory.
package chaos

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/curatorproject/curator/client"
	"github.com/curatorproject/curator/curator"
	"github.com/curatorproject/curator/internal/testenv"
	pb "github.com/curatorproject/curator/proto"
)

var (
	flagSeeds   = flag.Int("seeds", 1, "how many seeds to run (1..N), each a new cluster")
	flagFaults  = flag.Int("faults", 8, "steps (faults and operations) per seed")
	flagSeed    = flag.Uint64("seed", 0, "run this one seed only (a replay)")
	flagKeep    = flag.String("keep", "", "keep each seed's machines (data, logs) under this directory instead of a temporary one")
	flagHistory = flag.Bool("history", true, "record and check a history of the API's calls (history_test.go); false only to tell whether a failure needs it")
)

const (
	managers = 5
	workers  = 4
	// addresses is the loopback pool of the dev cluster's machines.
	addresses = "127.0.185.1-127.0.185.60"
	// port is the port dev's machines listen on.
	port = 7000

	// apiGap: the API may not stay silent longer than this while faults
	// run (faults never take more than a minority of the voters).
	apiGap = 15 * time.Second
	// apiBack: the API answers within this of the last fault's end.
	apiBack = 10 * time.Second
	// rebootSettle: a rebooted node counts as down to the schedule for
	// this long (its record may stay ready throughout).
	rebootSettle = 10 * time.Second
	// convergeTimeout bounds the wait for the cluster to settle after the
	// faults: every group at size on its SHA, every node ready, etcd
	// members equal to the consensus nodes.
	convergeTimeout = 4 * time.Minute
)

var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	// With fault points (curator/internal/faults): the delay and skew
	// steps arm them in a manager they restart; unarmed, they do
	// nothing.
	os.Exit(testenv.RunWithCurator(m, "curator-chaos-", &binary, "-tags", "faults"))
}

// TestChaos runs each seed's schedule against a new dev cluster of five
// managers and four workers, all made by their groups, as processes on
// loopback addresses.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos suite runs whole clusters: not in -short")
	}
	runSeeds(t, func(t *testing.T, dir string) (machines, []string) {
		m, err := newProcessMachines(dir)
		if err != nil {
			t.Fatal(err)
		}
		return m, []string{"--addresses", addresses}
	})
}

// variant makes a seed's machines in dir, and says what dev needs to
// make them.
type variant func(t *testing.T, dir string) (machines, []string)

// runSeeds runs every seed asked for on the variant's machines.
func runSeeds(t *testing.T, v variant) {
	seeds := make([]uint64, 0, *flagSeeds)
	if *flagSeed != 0 {
		seeds = append(seeds, *flagSeed)
	} else {
		for i := range *flagSeeds {
			seeds = append(seeds, uint64(i+1))
		}
	}
	began := time.Now()
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runSeed(t, v, seed, *flagFaults) })
	}
	t.Logf("%d seeds of %d steps in %s", len(seeds), *flagFaults, time.Since(began).Round(time.Second))
}

// runner is one seed's run: the cluster, the schedule's state and the log.
type runner struct {
	t      *testing.T
	seed   uint64
	dir    string
	cl     *client.Client
	m      machines
	began  time.Time
	holds  sync.WaitGroup
	rollNo int

	mu  sync.Mutex
	log []string
	// held: the nodes stopped or cut off, by name, and their machines.
	held map[string]heldFault
	// hit: node IDs killed (for good: their group replaces them with new
	// nodes) or rebooted (until rebootSettle has passed), which the
	// registry may still show ready for a while.
	hit    map[string]time.Time
	seen   map[string]string
	broken []string // invariants broken, as found
	// struck: every fault on a node, in order; watches: the bad
	// templates' rollouts not rolled back yet, by group; freezes: the
	// group-wide freezes under way, by group (brakes_test.go).
	struck  []strike
	watches map[string]*badWatch
	freezes map[string]*groupFreeze
	// dev is this run's `curator dev`; outage: a power loss is under
	// way (power_test.go), and the monitor's checks of the API wait.
	dev    *devProc
	devs   int
	outage bool
	// starving: a starve step's busy processes run.
	starving bool
	// delaysMet: the fault points the delay steps' managers delayed
	// at, one a step and point.
	delaysMet []string
	// starves: each starve step's time span; powerLosses: when each
	// power loss struck (liveMarkedDown).
	starves     [][2]time.Time
	powerLosses []time.Time
	// liveDown: the nodes marked down while no fault had hit them.
	liveDown []string
}

// heldFault is a fault on a node that lasts: a stop, a cut, a restart
// with a fault armed; its kind, the machine and the node's ID.
type heldFault struct {
	kind     stepKind
	instance string
	node     string
}

func runSeed(t *testing.T, v variant, seed uint64, faults int) {
	steps := schedule(seed, faults)
	r := &runner{t: t, seed: seed, dir: seedDir(t, seed), held: map[string]heldFault{}, hit: map[string]time.Time{}, seen: map[string]string{},
		watches: map[string]*badWatch{}, freezes: map[string]*groupFreeze{}}
	var devArgs []string
	r.m, devArgs = v(t, r.dir)
	r.up(devArgs)
	// After up's clean-ups, so that it runs before them, with the cluster
	// still there to ask.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replay: go test ./test/chaos -run '^%s$' -args -seed %d -faults %d", strings.Split(t.Name(), "/")[0], seed, faults)
			t.Logf("run log of seed %d:\n%s", seed, strings.Join(r.log, "\n"))
			r.dumpState()
			if *flagKeep != "" {
				logs := filepath.Join(r.dir, "logs")
				if err := r.m.keepLogs(logs); err != nil {
					t.Logf("keeping the machines' logs: %v", err)
				} else {
					t.Logf("the machines' logs kept in %s", logs)
				}
			}
		}
	})
	r.logf("schedule of seed %d: %d steps", seed, len(steps))
	if pm, ok := r.m.(*processMachines); ok && pm.noPartition != nil {
		// Said, not silent: the steps stay in the schedule (a seed
		// draws the same steps everywhere) and say so as they run.
		t.Logf("no partitions here (%v): a cut step stops its node instead, a partition step is skipped", pm.noPartition)
	}
	for i, s := range steps {
		r.logf("step %d: %s", i+1, s)
	}

	ctx, cancel := context.WithCancel(context.Background())
	monitorDone := make(chan struct{})
	go func() { defer close(monitorDone); r.monitor(ctx) }()
	var rec *recording
	if *flagHistory {
		var err error
		if rec, err = r.startHistory(); err != nil {
			cancel()
			<-monitorDone
			t.Fatalf("history: %v", err)
		}
	}

	ran, skipped := map[stepKind]int{}, map[stepKind]int{}
	for i, s := range steps {
		said := r.do(ctx, s)
		r.logf("step %d: %s", i+1, said)
		if strings.HasPrefix(said, "skipped") || strings.Contains(said, "not done") {
			skipped[s.Kind]++
		} else {
			ran[s.Kind]++
		}
		time.Sleep(s.Gap)
	}
	r.holds.Wait()
	// The bad templates' rollouts fail and roll back, or the monitor
	// says they did not, within their deadlines.
	for r.watching() {
		time.Sleep(200 * time.Millisecond)
	}
	lastFault := time.Now()
	r.logf("faults over")
	back := r.apiBack(lastFault)
	// After apiBack, which the check's time is not to count in.
	if rec != nil {
		r.checkHistory(rec)
	}
	cancel()
	<-monitorDone
	if back > apiBack {
		r.breakf("the API answered %s after the last fault ended, limit %s", back.Round(time.Millisecond), apiBack)
	}
	r.converge()
	r.checkEvents(steps)
	r.checkRecords()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.broken {
		t.Error(b)
	}
	t.Logf("seed %d: %d steps; %d invariants broken; ran %s; skipped %s; delays met %v; %d live nodes marked down", seed, len(steps), len(r.broken),
		countsByKind(ran), countsByKind(skipped), r.delaysMet, len(r.liveDown))
}

// countsByKind says a count per step kind, in the kinds' order.
func countsByKind(n map[stepKind]int) string {
	var parts []string
	for _, w := range weights {
		if n[w.kind] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", w.kind, n[w.kind]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// seedDir is where a seed's machines live: a temporary directory, or one
// under -keep that outlives the test for reading its logs.
func seedDir(t *testing.T, seed uint64) string {
	if *flagKeep == "" {
		return t.TempDir()
	}
	dir := filepath.Join(*flagKeep, strings.Split(t.Name(), "/")[0], fmt.Sprintf("seed-%d", seed))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("machines kept in %s", dir)
	return dir
}

func (r *runner) logf(format string, args ...any) {
	line := fmt.Sprintf("%8.3fs ", time.Since(r.began).Seconds()) + fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.log = append(r.log, line)
	r.mu.Unlock()
	if testing.Verbose() {
		r.t.Log(line)
	}
}

// breakf records a broken invariant.
func (r *runner) breakf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.logf("BROKEN: %s", msg)
	r.mu.Lock()
	r.broken = append(r.broken, msg)
	r.mu.Unlock()
}

// up starts `curator dev` (with args added) and waits until it is up.
func (r *runner) up(args []string) {
	t := r.t
	t.Helper()
	r.began = time.Now()
	t.Cleanup(r.m.killAll)
	err := r.startDev(append([]string{"--managers", strconv.Itoa(managers), "--workers", strconv.Itoa(workers)}, args...))
	t.Cleanup(func() {
		r.releaseAll()
		r.stopDev()
	})
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(r.dir, "config.yaml")
	cfg, err := client.LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if r.cl, err = client.Dial(ctx, cfg, cfgPath, client.WithCachePath(""), client.WithAttemptTimeout(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.cl.Close() })
	nodes, err := call(r.cl.ListNodes)
	if err != nil {
		t.Fatal(err)
	}
	info, err := call(r.cl.ClusterInfo)
	if err != nil {
		t.Fatal(err)
	}
	r.logf("dev is up: %d nodes, %d voters", len(nodes), len(info.GetVoters()))
	for _, group := range []string{"managers", "workers"} {
		if said := r.commit(group, brakeSpec); strings.Contains(said, "not done") {
			t.Fatal(said)
		}
	}
	r.logf("groups with replace_after %s, managers with max_unhealthy 1", replaceAfter)
}

// devProc is a running `curator dev`.
type devProc struct {
	cmd    *exec.Cmd
	exited chan error
}

// startDev runs `curator dev --dir DIR` with args added (the first one's
// log is DIR/dev.log, a later one's DIR/dev-N.log) and waits until it is
// up, or says why not.
func (r *runner) startDev(args []string) error {
	r.mu.Lock()
	r.devs++
	suffix := ""
	if r.devs > 1 {
		suffix = fmt.Sprintf("-%d", r.devs)
	}
	r.mu.Unlock()
	logPath := filepath.Join(r.dir, "dev"+suffix+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(binary, append([]string{"dev", "--dir", r.dir}, args...)...)
	if pm, ok := r.m.(*processMachines); ok {
		// Every agent dev and its leaders start inherits it (delay).
		cmd.Env = append(os.Environ(), curator.FaultDelayDirEnv+"="+pm.delayDir())
	}
	// dev prints the export line on stdout once the cluster is up.
	outPath := filepath.Join(r.dir, "dev"+suffix+".out")
	outFile, err := os.Create(outPath)
	if err != nil {
		logFile.Close()
		return err
	}
	cmd.Stdout, cmd.Stderr = outFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		outFile.Close()
		return err
	}
	d := &devProc{cmd: cmd, exited: make(chan error, 1)}
	go func() { d.exited <- cmd.Wait(); logFile.Close(); outFile.Close() }()
	r.mu.Lock()
	r.dev = d
	r.mu.Unlock()
	for began := time.Now(); ; time.Sleep(200 * time.Millisecond) {
		select {
		case err := <-d.exited:
			d.exited <- err // for stopDev
			out, _ := os.ReadFile(logPath)
			return fmt.Errorf("dev exited: %v\n%s", err, out)
		default:
		}
		if out, _ := os.ReadFile(outPath); strings.Contains(string(out), "export CURATOR_CONFIG=") {
			return nil
		}
		if time.Since(began) > 4*time.Minute {
			return fmt.Errorf("dev not up after %s; see %s", time.Since(began).Round(time.Second), logPath)
		}
	}
}

// stopDev stops this run's dev (SIGTERM: it stops its nodes), killing it
// after a minute.
func (r *runner) stopDev() {
	r.mu.Lock()
	d := r.dev
	r.mu.Unlock()
	if d == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(time.Minute):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
}

// call runs fn with a bounded context.
func call[T any](fn func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return fn(ctx)
}

// do runs one step and says what it did.
func (r *runner) do(ctx context.Context, s step) string {
	switch s.Kind {
	case stepKill, stepKillLeader, stepStop, stepCut, stepReboot:
		target, why := r.target(s)
		if target == nil {
			return "skipped: " + why
		}
		name, id := target.GetNode().GetName(), target.GetNode().GetInstanceId()
		kill := s.Kind == stepKill || s.Kind == stepKillLeader
		if kill {
			if why := r.killHolds(target); why != "" {
				return "skipped: " + why
			}
		}
		r.strikeNode(target, kill)
		switch s.Kind {
		case stepStop, stepCut:
			kind, err := s.Kind, error(nil)
			if kind == stepCut {
				if err = r.m.cut(ctx, id); errors.Is(err, errNoPartition) {
					kind, why = stepStop, why+" ("+err.Error()+")"
				}
			}
			if kind == stepStop {
				err = r.m.freeze(ctx, id)
			}
			if err != nil {
				return fmt.Sprintf("%s %s: not done: %v", s.Kind, name, err)
			}
			r.mu.Lock()
			r.held[name] = heldFault{kind: kind, instance: id, node: target.GetNode().GetId()}
			r.mu.Unlock()
			r.holds.Add(1)
			go func() {
				defer r.holds.Done()
				time.Sleep(s.Hold)
				r.release(name)
			}()
			return fmt.Sprintf("%s %s for %s%s", map[stepKind]string{stepStop: "stopped", stepCut: "cut off"}[kind], name, s.Hold, why)
		}
		until := time.Now().Add(rebootSettle)
		if s.Kind != stepReboot {
			until = time.Now().Add(24 * time.Hour)
		}
		r.mu.Lock()
		r.hit[target.GetNode().GetId()] = until
		r.mu.Unlock()
		if s.Kind != stepReboot {
			if err := r.m.kill(ctx, id); err != nil {
				return fmt.Sprintf("kill %s: not done: %v", name, err)
			}
			return fmt.Sprintf("killed %s%s", name, why)
		}
		if err := r.m.reboot(ctx, id); err != nil {
			return fmt.Sprintf("reboot %s: not done: %v", name, err)
		}
		return fmt.Sprintf("rebooted %s%s", name, why)
	case stepFreezeWorkers, stepFreezeManagers:
		return r.freezeGroup(ctx, s)
	case stepBadWorkers, stepBadManagers:
		return r.commitBad(s.Kind.group())
	case stepPowerLoss:
		return r.powerLoss(ctx)
	case stepDelay:
		return r.delay(s)
	case stepSkew:
		return r.restartArmed(ctx, s)
	case stepStarve:
		return r.starve(s)
	case stepPartition:
		return r.partition(ctx, s)
	case stepScaleWorkers:
		if why := r.busy("workers", false); why != "" {
			return "skipped: " + why
		}
		return r.commit("workers", func(g *pb.GroupSpec) { g.Size = workersSize(s.Pick) })
	case stepRollWorkers, stepRollManagers:
		group := s.Kind.group()
		if why := r.busy(group, false); why != "" {
			return "skipped: " + why
		}
		r.rollNo++
		version := fmt.Sprintf("chaos-%d", r.rollNo)
		return r.commit(group, func(g *pb.GroupSpec) { g.Template.Version = version })
	}
	return "unknown step"
}

// commit changes group's spec with change and commits it.
func (r *runner) commit(group string, change func(*pb.GroupSpec)) string {
	g, err := call(func(ctx context.Context) (*pb.GroupView, error) { return r.cl.GetGroup(ctx, group) })
	if err != nil {
		return fmt.Sprintf("commit %s: not done: %v", group, err)
	}
	spec := g.GetGroup().GetSpec()
	change(spec)
	v, err := call(func(ctx context.Context) (*pb.GroupView, error) {
		v, _, err := r.cl.CommitGroup(ctx, spec)
		return v, err
	})
	if err != nil {
		return fmt.Sprintf("commit %s: not done: %v", group, err)
	}
	return fmt.Sprintf("committed %s: size %d, version %s, config %s", group, spec.GetSize(), spec.GetTemplate().GetVersion(), short(v.GetGroup().GetConfigSha()))
}

// faultView is what a fault's choice of target reads: the nodes that
// may be hit (ready, with a machine, not down to the schedule: stopped,
// killed or rebooted a moment ago), sorted by name, every node by ID, the
// voters and how many of them are healthy, and the curator leader.
type faultView struct {
	ready   []*pb.NodeView
	byID    map[string]*pb.NodeView
	voters  []string
	healthy int
	leader  string
}

// faultView reads the cluster for a fault.
func (r *runner) faultView() (faultView, error) {
	nodes, err := call(r.cl.ListNodes)
	if err != nil {
		return faultView{}, fmt.Errorf("no node list: %w", err)
	}
	info, err := call(r.cl.ClusterInfo)
	if err != nil {
		return faultView{}, fmt.Errorf("no cluster info: %w", err)
	}
	r.mu.Lock()
	down := map[string]bool{}
	for _, n := range nodes {
		_, held := r.held[n.GetNode().GetName()]
		if held || time.Now().Before(r.hit[n.GetNode().GetId()]) {
			down[n.GetNode().GetId()] = true
		}
	}
	r.mu.Unlock()
	v := faultView{byID: map[string]*pb.NodeView{}, voters: info.GetVoters(), leader: info.GetLeader()}
	for _, n := range nodes {
		v.byID[n.GetNode().GetId()] = n
		if n.GetNode().GetStatus() == pb.NodeStatus_NODE_STATUS_READY && !down[n.GetNode().GetId()] && n.GetNode().GetInstanceId() != "" {
			v.ready = append(v.ready, n)
		}
	}
	slices.SortFunc(v.ready, func(a, b *pb.NodeView) int { return strings.Compare(a.GetNode().GetName(), b.GetNode().GetName()) })
	// A voter counts as healthy when its node is ready, the schedule has
	// not hit it, and its etcd takes connections: a node's record stays
	// ready across a reboot, while its etcd may not be back yet.
	for _, id := range info.GetVoters() {
		if n := v.byID[id]; n != nil && n.GetNode().GetStatus() == pb.NodeStatus_NODE_STATUS_READY && !down[id] && etcdAnswers(n.GetNode().GetAddress()) {
			v.healthy++
		}
	}
	return v, nil
}

// spares says whether the healthy voters keep a majority with k of them
// hit.
func (v faultView) spares(k int) bool { return v.healthy-k >= len(v.voters)/2+1 }

func (v faultView) isVoter(n *pb.NodeView) bool {
	return slices.Contains(v.voters, n.GetNode().GetId())
}

// target picks a fault's node: the leader, or one of the ready nodes by
// the step's pick. A manager is spared (a worker taken instead) unless the
// voters that are ready and running keep a majority without it: the
// faults never take the quorum themselves.
func (r *runner) target(s step) (*pb.NodeView, string) {
	v, err := r.faultView()
	if err != nil {
		return nil, err.Error()
	}
	return v.target(s)
}

func (v faultView) target(s step) (*pb.NodeView, string) {
	spare := v.spares(1)
	if s.Kind == stepKillLeader {
		n := v.byID[v.leader]
		if n == nil || !slices.Contains(v.ready, n) {
			return nil, "the leader is not a ready node"
		}
		if !spare {
			return nil, fmt.Sprintf("the leader is needed: %d of %d voters healthy", v.healthy, len(v.voters))
		}
		return n, " (the curator leader)"
	}
	var candidates []*pb.NodeView
	for _, n := range v.ready {
		if spare || !v.isVoter(n) {
			candidates = append(candidates, n)
		}
	}
	if len(candidates) == 0 {
		return nil, "no node may be hit"
	}
	return v.pick(candidates, s)
}

// pick is the step's target among candidates (its pick), and says so
// when it is the curator leader.
func (v faultView) pick(candidates []*pb.NodeView, s step) (*pb.NodeView, string) {
	n := candidates[int(s.Pick)%len(candidates)]
	if n.GetNode().GetId() == v.leader {
		return n, " (the curator leader)"
	}
	return n, ""
}

// etcdAnswers says whether the etcd of the node at addr (IP:PORT; etcd's
// client port is PORT+2) takes a connection.
func etcdAnswers(addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return false
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(p+2)), 300*time.Millisecond)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// release ends a held fault: continues a stopped node, joins a cut one
// again, restarts one with a fault armed without it (counted as down to
// the schedule for rebootSettle after, as a reboot is).
func (r *runner) release(name string) {
	r.mu.Lock()
	h, ok := r.held[name]
	delete(r.held, name)
	restart := h.kind == stepSkew
	if ok && restart {
		r.hit[h.node] = time.Now().Add(rebootSettle)
	}
	r.mu.Unlock()
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	note := ""
	switch {
	case h.kind == stepCut:
		note, err = r.m.heal(ctx, h.instance)
	case restart:
		err = r.m.restart(ctx, h.instance, nil)
		note = "restarted without the fault"
	default:
		err = r.m.thaw(ctx, h.instance)
	}
	if note != "" {
		note = ": " + note
	}
	switch {
	case err != nil && !r.m.alive(h.instance):
		// Its group destroyed it meanwhile (down long enough).
		r.logf("released %s: its machine is gone (%v)", name, err)
	case err != nil:
		r.breakf("could not release %s: %v", name, err)
	default:
		r.logf("released %s%s", name, note)
	}
}

// releaseAll releases every held fault.
func (r *runner) releaseAll() {
	r.mu.Lock()
	names := make([]string, 0, len(r.held))
	for name := range r.held {
		names = append(names, name)
	}
	r.mu.Unlock()
	for _, name := range names {
		r.release(name)
	}
}

// monitor asks for the cluster info every 200 ms until ctx ends: the API
// may not stay silent for apiGap, and each change of leader is logged.
// It also notes every ready node, for checkRecords.
func (r *runner) monitor(ctx context.Context) {
	lastAnswer := time.Now()
	silentReported, quorumReported := false, false
	leader := ""
	for i := 0; ctx.Err() == nil; i++ {
		info, err := call(r.cl.ClusterInfo)
		now := time.Now()
		r.mu.Lock()
		outage := r.outage
		r.mu.Unlock()
		switch {
		case outage:
			// A power loss took every process: silence, and a quorum
			// lost, are the fault's own (power_test.go checks what
			// comes back).
			lastAnswer, silentReported = now, false
		case err == nil:
			if silentReported {
				r.logf("the API answers again after %s", now.Sub(lastAnswer).Round(time.Millisecond))
			}
			lastAnswer, silentReported = now, false
			if info.GetLeader() != leader {
				leader = info.GetLeader()
				r.logf("leader %s (%s)", short(leader), info.GetNames()[leader])
			}
		case errors.Is(err, client.ErrQuorumLost) && !quorumReported:
			// Only a manager that finds too few voters answering says so
			// (an election under way is not a loss), and the faults
			// never take more than a minority of the voters: a quorum
			// lost is the curator's own doing.
			quorumReported = true
			r.breakf("the cluster said its quorum was lost, with faults on a minority of the voters: %v", err)
		case now.Sub(lastAnswer) > apiGap && !silentReported:
			silentReported = true
			r.breakf("the API gave no answer for %s while the faults ran: %v", now.Sub(lastAnswer).Round(time.Millisecond), err)
		}
		// The nodes every second, and every time while a bad template's
		// rollout is watched.
		if watching := r.watching(); i%5 == 0 || watching {
			nodes, err := call(r.cl.ListNodes)
			if err == nil {
				r.mu.Lock()
				for _, n := range nodes {
					if n.GetNode().GetStatus() == pb.NodeStatus_NODE_STATUS_READY {
						r.seen[n.GetNode().GetId()] = n.GetNode().GetInstanceId()
					}
				}
				r.mu.Unlock()
			}
			if watching {
				r.watchBad(nodes)
			}
			if err == nil {
				r.watchFreezes(nodes)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// apiBack waits until the API answers and returns how long after since.
func (r *runner) apiBack(since time.Time) time.Duration {
	for time.Since(since) < 2*time.Minute {
		if _, err := call(r.cl.ClusterInfo); err == nil {
			return time.Since(since)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(since)
}

// converge waits for the cluster to settle: every group at its size, each
// machine's node ready on the group's SHA, no rollout under way, every
// node ready, and etcd's members exactly the nodes with the consensus
// role, all voters.
func (r *runner) converge() {
	began := time.Now()
	var last error
	said := ""
	for time.Since(began) < convergeTimeout {
		if last = r.settled(); last == nil {
			r.logf("converged %s after the faults", time.Since(began).Round(time.Millisecond))
			return
		}
		// What it waits for, each time that changes: a slow convergence
		// reads from the log.
		if last.Error() != said {
			said = last.Error()
			r.logf("not converged yet: %s", said)
		}
		time.Sleep(time.Second)
	}
	r.breakf("not converged %s after the faults: %v", convergeTimeout, last)
}

func (r *runner) settled() error {
	groups, err := call(r.cl.ListGroups)
	if err != nil {
		return err
	}
	nodes, err := call(r.cl.ListNodes)
	if err != nil {
		return err
	}
	info, err := call(r.cl.ClusterInfo)
	if err != nil {
		return err
	}
	sha := map[string]string{}
	for _, g := range groups {
		name, size := g.GetGroup().GetSpec().GetName(), g.GetGroup().GetSpec().GetSize()
		sha[name] = g.GetGroup().GetConfigSha()
		if g.GetMachines() != size || g.GetReady() != size || uint32(len(g.GetNodeIds())) != size {
			return fmt.Errorf("group %s: size %d, %d machines, %d ready, %d nodes", name, size, g.GetMachines(), g.GetReady(), len(g.GetNodeIds()))
		}
		if st := g.GetRolloutState(); st == "rolling" || st == "paused" {
			return fmt.Errorf("group %s: rollout %s", name, st)
		}
		if held := g.GetGroup().GetRepairHeld(); held != "" {
			return fmt.Errorf("group %s: repairs held: %s", name, held)
		}
	}
	var consensus []string
	for _, n := range nodes {
		nd := n.GetNode()
		if nd.GetStatus() != pb.NodeStatus_NODE_STATUS_READY {
			return fmt.Errorf("node %s is %s", nd.GetName(), nd.GetStatus())
		}
		if want, ok := sha[nd.GetGroup()]; ok && nd.GetConfigSha() != want {
			return fmt.Errorf("node %s on config %s, its group on %s", nd.GetName(), short(nd.GetConfigSha()), short(want))
		}
		if slices.Contains(nd.GetRoles(), pb.Role_ROLE_CONSENSUS) {
			consensus = append(consensus, nd.GetId())
		}
	}
	slices.Sort(consensus)
	voters := slices.Sorted(slices.Values(info.GetVoters()))
	if !slices.Equal(consensus, voters) || len(info.GetLearners()) > 0 || !info.GetQuorumHealthy() {
		return fmt.Errorf("consensus nodes %v, voters %v, learners %v, quorum healthy %v", shorts(consensus), shorts(voters), shorts(info.GetLearners()), info.GetQuorumHealthy())
	}
	return nil
}

// checkEvents checks that at most one leader acted at any moment: the
// events, in the order they were recorded, never go back to an earlier
// term, and each term belongs to one leader. A deposed leader's write
// would show as an older term after a newer one. It also checks that the
// groups made no more machines than the steps called for, twice over (see
// machinesNeeded): a machine that cannot join and is made again and
// again shows here, even when the cluster converges in the end.
func (r *runner) checkEvents(steps []step) {
	events, err := call(func(ctx context.Context) ([]*pb.Event, error) { return r.cl.ListEvents(ctx, 0) })
	if err != nil {
		r.breakf("events: %v", err)
		return
	}
	var term int64
	leaderOf := map[int64]string{}
	for _, ev := range events {
		if ev.GetTerm() == 0 {
			continue // recorded by a follower (a dead leader's lease revoked)
		}
		if l, ok := leaderOf[ev.GetTerm()]; ok && l != ev.GetLeader() {
			r.breakf("term %d has two leaders, %s and %s", ev.GetTerm(), short(l), short(ev.GetLeader()))
		}
		leaderOf[ev.GetTerm()] = ev.GetLeader()
		if ev.GetTerm() < term {
			r.breakf("an event of term %d (leader %s) after one of term %d: %s %s %s", ev.GetTerm(), short(ev.GetLeader()), term, ev.GetLoop(), ev.GetAction(), ev.GetReason())
		}
		term = max(term, ev.GetTerm())
	}
	actions := map[string]int{}
	for _, ev := range events {
		actions[ev.GetLoop()+"/"+ev.GetAction()]++
	}
	r.logf("%d events over %d terms: %v", len(events), len(leaderOf), actions)
	downs, starved := r.liveMarkedDown(events)
	for _, d := range downs {
		r.logf("marked down while no fault had hit it: %s", d)
	}
	r.mu.Lock()
	r.liveDown = downs
	r.mu.Unlock()
	if len(downs) > 0 {
		r.logf("%d nodes marked down while no fault had hit them (%d with the host starved)", len(downs), starved)
	}
	if made, need := actions["groups/provision"], machinesNeeded(steps); made > 2*need {
		r.breakf("the groups made %d machines, the steps called for %d: machines made again and again", made, need)
	}
}

// machinesNeeded is how many machines a schedule calls for at most: the
// cluster's own, one for each fault (a node hit may be replaced), a group
// size's worth for each rollout, and two for each scale-up.
func machinesNeeded(steps []step) int {
	need := managers + workers
	for _, s := range steps {
		switch s.Kind {
		case stepRollManagers:
			need += managers
		case stepRollWorkers:
			need += int(workersSize(2))
		case stepScaleWorkers:
			need += int(workersSize(2)) - int(workersSize(0))
		case stepBadWorkers, stepBadManagers:
			need += 2 // a new machine that fails, one that replaces it
		case stepFreezeWorkers, stepFreezeManagers, stepStarve:
			// Nothing is replaced.
		default:
			need++
		}
	}
	return need
}

// checkRecords checks that no node record was lost: every node seen ready
// whose machine still runs has its record.
func (r *runner) checkRecords() {
	nodes, err := call(r.cl.ListNodes)
	if err != nil {
		r.breakf("nodes: %v", err)
		return
	}
	have := map[string]bool{}
	for _, n := range nodes {
		have[n.GetNode().GetId()] = true
	}
	r.mu.Lock()
	seen := maps(r.seen)
	r.mu.Unlock()
	for id, instance := range seen {
		if have[id] {
			continue
		}
		if r.m.alive(instance) {
			r.breakf("node %s lost its record while its machine %s runs", short(id), instance)
		}
	}
}

// dumpState logs what the cluster says of itself: its groups and their
// rollouts, its nodes, and the curator's own events.
func (r *runner) dumpState() {
	var b strings.Builder
	if groups, err := call(r.cl.ListGroups); err == nil {
		for _, g := range groups {
			name := g.GetGroup().GetSpec().GetName()
			fmt.Fprintf(&b, "group %s: size %d, config %s, %d machines, %d ready, rollout %q\n", name, g.GetGroup().GetSpec().GetSize(),
				short(g.GetGroup().GetConfigSha()), g.GetMachines(), g.GetReady(), g.GetRolloutState())
			if ro, err := call(func(ctx context.Context) (*pb.Rollout, error) { return r.cl.GetRollout(ctx, name) }); err == nil {
				fmt.Fprintf(&b, "  rollout: %v\n", ro)
			}
		}
	} else {
		fmt.Fprintf(&b, "groups: %v\n", err)
	}
	if nodes, err := call(r.cl.ListNodes); err == nil {
		for _, n := range nodes {
			nd := n.GetNode()
			fmt.Fprintf(&b, "node %s %s: %s, roles %v, config %s, manager %s, drained %v, demoting %v\n", short(nd.GetId()), nd.GetName(), nd.GetStatus(),
				nd.GetRoles(), short(nd.GetConfigSha()), n.GetManagerStatus(), nd.GetAvailability(), nd.GetDemoting())
		}
	}
	if events, err := call(func(ctx context.Context) ([]*pb.Event, error) { return r.cl.ListEvents(ctx, 0) }); err == nil {
		for _, ev := range events {
			fmt.Fprintf(&b, "%s term %d leader %s %s %s %s: %s\n", ev.GetTime().AsTime().Format("15:04:05.000"), ev.GetTerm(),
				short(ev.GetLeader()), ev.GetLoop(), ev.GetAction(), short(ev.GetNodeId()), ev.GetReason())
		}
	} else {
		fmt.Fprintf(&b, "events: %v\n", err)
	}
	r.t.Logf("the cluster at the end:\n%s", b.String())
}

func maps(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func shorts(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = short(id)
	}
	return out
}

// TestChaosDocker runs the schedule against a dev cluster of containers on
// a Docker network of its own: a cut disconnects a node's container from
// the network (every link of it at once), a stop pauses it. It skips,
// saying why, where no Docker daemon answers.
func TestChaosDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos suite runs whole clusters: not in -short")
	}
	const (
		network = "curator-chaos"
		subnet  = "172.30.104.0/24"
	)
	m, _, image := newDockerMachines(t, network, subnet)
	runSeeds(t, func(t *testing.T, dir string) (machines, []string) {
		return m, []string{"--provider", "docker", "--network", network, "--subnet", subnet, "--image", image}
	})
}
