package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"
	"time"

	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

// readyPoll is how often the bench lists the nodes while it waits for them.
const readyPoll = time.Second

// bringUp starts the cluster and joins the fleet, then waits for every
// simulated node to be ready. It returns what it started even with an
// error: the caller reports the figures so far, then closes the fleet and
// then the cluster.
func bringUp(ctx context.Context, cc clusterConfig, managers []netip.AddrPort, simBase netip.Addr, fc fleetConfig, p *progress, fig *joinFigures) (*cluster, *fleet, error) {
	if err := checkFileLimit(fc.nodes); err != nil {
		return nil, nil, err
	}
	c, err := startCluster(ctx, cc, managers, p)
	if err != nil {
		return nil, nil, err
	}
	f, err := newFleet(fc, cc.interval, c, simBase, p)
	if err != nil {
		return c, nil, err
	}
	c.rssBefore = map[int]uint64{}
	for _, m := range c.managers {
		if rss, err := procRSS(m.pid()); err == nil {
			c.rssBefore[m.pid()] = rss
		}
	}
	mem0 := goMemory()
	pids := []int{os.Getpid()}
	for _, m := range c.managers {
		pids = append(pids, m.pid())
	}
	rev0, revErr := c.etcdRevision(ctx)
	conns0, connsErr := c.connections(ctx)
	profiles := profileJoins(ctx, c, fc.joinProfile, p)
	w := startCPUWindow(pids...)
	start := time.Now()
	err = f.join(ctx, fig)
	var managersCPU time.Duration
	for _, m := range c.managers {
		fig.JoinManagersCPUPct = append(fig.JoinManagersCPUPct, round3(w.pct(m.pid())))
		if used, ok := w.used(m.pid()); ok {
			managersCPU += used
		}
	}
	fig.JoinSimCPUPct, fig.JoinHostBusyPct = round3(w.pct(os.Getpid())), round3(w.hostPct())
	if fig.Joined > 0 {
		per := managersCPU / time.Duration(fig.Joined)
		fig.JoinManagersCPUMsPerJoin = ms(per)
		fig.JoinGoalRatio = round3(float64(per) / float64(joinCPUGoal))
		if used, ok := w.used(os.Getpid()); ok {
			fig.JoinSimCPUMsPerJoin = ms(used / time.Duration(fig.Joined))
		}
		p.printf("a join cost the managers %.3f ms of CPU (goal %.1f ms: ratio %.2f), the bench %.3f ms",
			fig.JoinManagersCPUMsPerJoin, ms(joinCPUGoal), fig.JoinGoalRatio, fig.JoinSimCPUMsPerJoin)
	}
	if rev1, err := c.etcdRevision(ctx); err == nil && revErr == nil {
		fig.JoinEtcdWrites = rev1 - rev0
	}
	if conns1, err := c.connections(ctx); err == nil && connsErr == nil && fig.Joined > 0 {
		fig.JoinHandshakesPerJoin = round3((conns1 - conns0) / float64(fig.Joined))
	}
	profiles()
	fig.SimGoroutines = runtime.NumGoroutine()
	if fig.Joined > 0 {
		fig.SimKiBPerNode = round3(float64(goMemory()-mem0) / 1024 / float64(fig.Joined))
	}
	if err != nil {
		return c, f, err
	}
	err = f.waitReady(ctx, c, start, fig)
	return c, f, err
}

// profileJoins starts each manager's CPU profile over the first
// joinProfileWindow of the join wave into dir (none with dir ""); the
// function it returns waits for them.
func profileJoins(ctx context.Context, c *cluster, dir string, p *progress) (wait func()) {
	if dir == "" {
		return func() {}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.printf("could not profile the join wave: %v", err)
		return func() {}
	}
	var wg sync.WaitGroup
	for _, m := range c.managers {
		wg.Go(func() {
			path := filepath.Join(dir, m.name+"-join-cpu.pprof")
			if err := fetchCPUProfile(ctx, m, joinProfileWindow, path); err != nil {
				p.printf("could not profile %s over the join wave: %v", m.name, err)
			}
		})
	}
	return wg.Wait
}

// goMemory is the bench's heap and stacks in use after a collection: what
// the simulated nodes hold, unlike RSS, which the runtime gives back to the
// kernel only lazily.
// withFleet brings up the cluster and the fleet, runs measure once every
// node has joined (a fleet that did not all come ready is measured anyway:
// the figures say where the time went), and takes both down, calling
// atClose on the fleet just before it goes. It returns every problem met.
func withFleet(ctx context.Context, cc clusterConfig, managers []netip.AddrPort, simBase netip.Addr, fc fleetConfig, p *progress, fig *joinFigures,
	measure func(*cluster, *fleet) []error, atClose func(*fleet)) []error {
	c, f, err := bringUp(ctx, cc, managers, simBase, fc, p, fig)
	var problems []error
	if err != nil {
		problems = append(problems, err)
	}
	if f != nil && (err == nil || fig.Joined == fc.nodes) {
		problems = append(problems, measure(c, f)...)
	}
	if f != nil {
		f.close()
		if atClose != nil {
			atClose(f)
		}
	}
	if c != nil {
		c.close()
	}
	return problems
}

// finish writes the result line, with the problems as its error, and
// returns them.
func finish(stdout io.Writer, res any, setError func(string), problems []error) error {
	err := errors.Join(problems...)
	if err != nil {
		setError(err.Error())
	}
	if werr := writeResult(stdout, res); werr != nil {
		return werr
	}
	return err
}

func goMemory() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// checkFileLimit fails early when the bench cannot hold a connection per
// node (Go raises the soft limit to the hard one at start).
func checkFileLimit(nodes int) error {
	limit, err := openFileLimit()
	if err != nil || limit == 0 {
		return nil //nolint:nilerr // no limit to check against
	}
	if need := uint64(nodes) + 256; need > limit {
		return fmt.Errorf("--nodes %d needs about %d open files, the limit is %d (ulimit -n)", nodes, need, limit)
	}
	return nil
}

// waitReady polls the node list until every simulated node is ready, or
// readyTimeout passes. ReadyS is taken from the nodes' own status_changed,
// so it does not depend on the polling.
func (f *fleet) waitReady(ctx context.Context, c *cluster, start time.Time, fig *joinFigures) error {
	deadline := time.Now().Add(f.cfg.readyTimeout)
	lastPrint := time.Now()
	total := len(f.alive())
	for {
		nodes, _, _, err := c.listNodes(ctx, 0)
		if err == nil {
			ready := 0
			var last time.Time
			for _, v := range nodes {
				n := v.GetNode()
				if f.node(n.GetId()) == nil || n.GetStatus() != pb.NodeStatus_NODE_STATUS_READY {
					continue
				}
				ready++
				if t := n.GetStatusChanged().AsTime(); t.After(last) {
					last = t
				}
			}
			fig.Ready = ready
			if !last.IsZero() {
				fig.ReadyS = secs(last.Sub(start))
			}
			if ready == total {
				p := f.progress
				p.printf("all %d nodes ready, %.1fs after the first join", ready, fig.ReadyS)
				return nil
			}
			if time.Since(lastPrint) >= 5*time.Second {
				f.progress.printf("%d of %d nodes ready", ready, total)
				lastPrint = time.Now()
			}
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("waiting for the nodes to be ready: %w", err)
			}
			return fmt.Errorf("only %d of %d nodes ready %s after they all joined", fig.Ready, total, f.cfg.readyTimeout)
		}
		if supervisor.Sleep(ctx, readyPoll) != nil {
			return ctx.Err()
		}
	}
}

// writeResult writes v as the one JSON line of a subcommand.
func writeResult(w io.Writer, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}

// failoverProfile is how long the bench profiles itself after it killed
// the leader.
const failoverProfile = 30 * time.Second

// profileFor writes the bench's CPU profile over the next d to path, in
// the background.
func profileFor(path string, d time.Duration) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return err
	}
	time.AfterFunc(d, func() {
		pprof.StopCPUProfile()
		f.Close()
	})
	return nil
}

// startProfile starts the bench's CPU profile into dir/sim-cpu.pprof; the
// function it returns stops it and writes the heap profile to
// dir/sim-heap.pprof. With dir "", it does nothing.
func startProfile(dir string) (stop func() error, err error) {
	if dir == "" {
		return func() error { return nil }, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cpu, err := os.Create(filepath.Join(dir, "sim-cpu.pprof"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		cpu.Close()
		return nil, err
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := cpu.Close(); err != nil {
			return err
		}
		heap, err := os.Create(filepath.Join(dir, "sim-heap.pprof"))
		if err != nil {
			return err
		}
		runtime.GC()
		if err := pprof.WriteHeapProfile(heap); err != nil {
			heap.Close()
			return err
		}
		return heap.Close()
	}, nil
}
