package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/curatorproject/curator/client"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/test/history"
)

// Every seed records what clients see while its schedule runs
// (test/history): three clients, each pinned to a manager of its own,
// write the label `history` of two managers and two workers and read
// them back (node ls, node inspect), commit a group of their own
// (size 0: no machine) and read its config SHA back (group describe,
// rollout status), while a watch of the events and one of the nodes run
// across the failovers. At the end of the faults the history is checked
// for linearizability and the watches by their validators; a violation
// fails the run, its visualisation written where historyDir says
// (test/history/README.md).
//
// Availability is not written (a rollout drains nodes itself: the
// register would have a writer the history does not see), nor roles (the
// groups own them).

const (
	// historyClients is how many clients record, each through its own
	// manager.
	historyClients = 3
	// historyWritePause is the least time between two writes of one
	// client: each write records an event, and the suite's checks read
	// the events, of which the cluster keeps the newest 1,000.
	historyWritePause = 2 * time.Second
)

// recording is a seed's history under way.
type recording struct {
	rec    *history.Recorder
	w      *history.Workload
	cancel context.CancelFunc
	done   chan error
}

// startHistory starts recording, or says why it could not.
func (r *runner) startHistory() (*recording, error) {
	cfgPath := filepath.Join(r.dir, "config.yaml")
	cfg, err := client.LoadConfig(cfgPath)
	if err != nil {
		return nil, err
	}
	info, err := call(r.cl.ClusterInfo)
	if err != nil {
		return nil, err
	}
	nodes, err := call(r.cl.ListNodes)
	if err != nil {
		return nil, err
	}
	g, err := call(func(ctx context.Context) (*pb.GroupView, error) { return r.cl.GetGroup(ctx, "workers") })
	if err != nil {
		return nil, err
	}
	w := &history.Workload{Config: cfg, ConfigPath: cfgPath, Managers: info.GetManagers(), Clients: historyClients,
		Group: g.GetGroup().GetSpec(), Groups: 1, WritePause: historyWritePause, Seed: r.seed, Logf: r.logf}
	// Two nodes of each group, in ID order.
	byGroup := map[string][]string{}
	for _, n := range nodes {
		byGroup[n.GetNode().GetGroup()] = append(byGroup[n.GetNode().GetGroup()], n.GetNode().GetId())
	}
	for _, group := range []string{"managers", "workers"} {
		ids := byGroup[group]
		slices.Sort(ids)
		w.Nodes = append(w.Nodes, ids[:min(2, len(ids))]...)
	}
	h := &recording{rec: history.NewRecorder(), w: w, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- w.Run(ctx, h.rec) }()
	r.logf("history: recording: %s", w)
	return h, nil
}

// checkHistory stops the recording and checks it: a violation breaks the
// seed.
func (r *runner) checkHistory(h *recording) {
	h.cancel()
	if err := <-h.done; err != nil {
		r.breakf("history: the recording failed: %v", err)
		return
	}
	dir := r.historyDir()
	began := time.Now()
	sum, note, err := h.rec.Check(dir)
	r.logf("history: %s checked in %s", sum, time.Since(began).Round(time.Millisecond))
	if note != "" {
		r.logf("history: %s", note)
	}
	if err != nil {
		r.breakf("history: %v", err)
	}
}

// historyDir is where a failed check writes its visualisation: the
// -keep directory of the run, else the one CURATOR_TEST_KEEP names,
// else a new temporary directory that is kept after the test (the places
// docs/testing.md and test/history/README.md describe).
func (r *runner) historyDir() string {
	seed := fmt.Sprintf("seed-%d", r.seed)
	test := strings.Split(r.t.Name(), "/")[0]
	switch {
	case *flagKeep != "":
		return filepath.Join(r.dir, "history")
	case os.Getenv("CURATOR_TEST_KEEP") != "":
		return filepath.Join(os.Getenv("CURATOR_TEST_KEEP"), test, seed, "history")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("curator-chaos-history-%s-%s-%d", test, seed, os.Getpid()))
}
