package history

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// tmp holds the binary built with -tags faults (faultsBinary), made on
// first use: the model's tests need none.
var (
	tmp       string
	buildOnce sync.Once
	binary    string
	buildErr  error
)

func TestMain(m *testing.M) {
	var err error
	if tmp, err = os.MkdirTemp("", "curator-history-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}

// faultsBinary is the curator built with -tags faults: its fault points
// armed by CURATOR_FAULT, none without.
func faultsBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binary = filepath.Join(tmp, "curator-faults")
		buildErr = testenv.GoBuild(binary, "./cmd/curator", "-tags", "faults")
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// TestPlantedStaleReadIsCaught runs the workload against a dev cluster
// (three managers, a worker) of the faults binary twice: with the fault
// point read/stale-500ms armed in the first manager, which leads (node
// reads served from a view 500 ms old), the check must fail and write the
// history's visualisation; with nothing armed, the same binary and
// workload must pass. Without the checker (a Check that passes
// everything) the first half fails.
func TestPlantedStaleReadIsCaught(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two dev clusters: not in -short")
	}
	for _, tc := range []struct {
		name, fault, addresses string
		caught                 bool
	}{
		{"off", "", "127.0.186.1-127.0.186.30", false},
		{"on", curator.FaultReadStale500ms, "127.0.186.31-127.0.186.60", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cl := startDev(t, dir, tc.fault, "--managers", "3", "--workers", "1", "--addresses", tc.addresses)
			rec, w := record(t, cl, dir, 15*time.Second)
			// The visualisation outlives the test under CURATOR_TEST_KEEP
			// (.ci/run sets it), else it goes with the test's dir.
			logs := filepath.Join(dir, "history")
			if keep := os.Getenv("CURATOR_TEST_KEEP"); keep != "" {
				logs = filepath.Join(keep, t.Name())
			}
			sum, note, err := rec.Check(logs)
			t.Logf("%s: %s; %s", tc.name, sum, note)
			if sum.Reads < 100 || sum.Writes < 20 {
				t.Fatalf("the workload (%s) made too few calls to tell: %s", w, sum)
			}
			html := filepath.Join(logs, VisualizationFile)
			if !tc.caught {
				if err != nil {
					t.Fatalf("with no fault armed the check failed: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("with %s armed the check passed: the checker did not catch the stale reads (%s)", tc.fault, sum)
			}
			if !strings.Contains(err.Error(), "not linearizable") || !strings.Contains(err.Error(), html) {
				t.Errorf("the check failed, but not as a stale read with its visualisation %s: %v", html, err)
			}
			if b, rerr := os.ReadFile(html); rerr != nil || !strings.Contains(string(b), "<html") {
				t.Errorf("visualisation %s: %v, %d bytes", html, rerr, len(b))
			}
			t.Logf("caught, as it must be: %v", err)
		})
	}
}

// record runs the workload against cl's cluster for d: a client per
// manager, every node's label and availability, two groups of size 0.
func record(t *testing.T, cl *client.Client, dir string, d time.Duration) (*Recorder, *Workload) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	info, err := cl.ClusterInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := cl.ListNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g, err := cl.GetGroup(ctx, "workers")
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	cfg, err := client.LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	w := &Workload{Config: cfg, ConfigPath: cfgPath, Managers: info.GetManagers(), Availability: true,
		Group: g.GetGroup().GetSpec(), Groups: 2, Seed: 1, Logf: t.Logf}
	for _, n := range nodes {
		if n.GetNode().GetGroup() == "workers" {
			// The worker is promoted and demoted too.
			w.Roles = append(w.Roles, n.GetNode().GetId())
		}
		w.Nodes = append(w.Nodes, n.GetNode().GetId())
		if n.GetManagerStatus() == pb.ManagerStatus_MANAGER_STATUS_LEADER {
			t.Logf("the leader is %s", n.GetNode().GetName())
		}
	}
	slices.Sort(w.Nodes)
	rec := NewRecorder()
	rctx, rcancel := context.WithTimeout(context.Background(), d)
	defer rcancel()
	if err := w.Run(rctx, rec); err != nil {
		t.Fatal(err)
	}
	return rec, w
}

// startDev runs `curator dev --dir dir` of the faults binary with fault
// armed (none if empty) and args, waits until it is up and returns a
// client of it. dev is stopped when the test ends.
func startDev(t *testing.T, dir, fault string, args ...string) *client.Client {
	t.Helper()
	bin := faultsBinary(t)
	cmd := exec.Command(bin, append([]string{"dev", "--dir", dir}, args...)...)
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, curator.FaultEnv+"=") }), curator.FaultEnv+"="+fault)
	logPath, outPath := filepath.Join(dir, "dev.log"), filepath.Join(dir, "dev.out")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	outFile, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = outFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); logFile.Close(); outFile.Close() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("dev's log: %s (the agents' under %s)", logPath, filepath.Join(dir, "instances"))
		}
	})
	testenv.Eventually(t, 3*time.Minute, "dev up", func() error {
		select {
		case err := <-exited:
			exited <- err
			b, _ := os.ReadFile(logPath)
			t.Fatalf("dev exited: %v\n%s", err, b)
		default:
		}
		if out, _ := os.ReadFile(outPath); !strings.Contains(string(out), "export CURATOR_CONFIG=") {
			return errors.New("no export line yet")
		}
		return nil
	})
	cfgPath := filepath.Join(dir, "config.yaml")
	cfg, err := client.LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := client.Dial(ctx, cfg, cfgPath, client.WithCachePath(""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	// Every node ready, each manager a voter: the workload starts on a
	// settled cluster.
	testenv.Eventually(t, 2*time.Minute, "four nodes ready, three voters", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		nodes, err := cl.ListNodes(ctx)
		if err != nil {
			return err
		}
		ready := 0
		for _, n := range nodes {
			if n.GetNode().GetStatus() == pb.NodeStatus_NODE_STATUS_READY {
				ready++
			}
		}
		info, err := cl.ClusterInfo(ctx)
		if err != nil {
			return err
		}
		if ready != 4 || len(info.GetVoters()) != 3 {
			return fmt.Errorf("%d nodes ready, %d voters", ready, len(info.GetVoters()))
		}
		return nil
	})
	return cl
}
