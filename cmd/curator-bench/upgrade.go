package main

// `curator-bench upgrade`: what `curator upgrade` costs a cluster, against
// a plain rollout of the same groups in the same run: a `curator dev` of
// the previous release is rolled to a new template version (the baseline:
// every machine replaced, the release the same), then upgraded to this
// checkout's release and back, with management calls every 100 ms beside.

import (
	"context"
	"errors"
	"fmt"

	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/curatorproject/curator/client"
	"github.com/curatorproject/curator/internal/testenv"
)

// Defaults of `curator-bench upgrade`.
const (
	DefaultUpgradeManagers  = 3
	DefaultUpgradeWorkers   = 2
	DefaultUpgradeAddresses = "127.0.156.10-127.0.156.60"
	upgradeCallEvery        = 100 * time.Millisecond
)

type upgradeConfig struct {
	curator, from string
	dir           string
	managers      int
	workers       int
	addresses     string
	timeout       time.Duration
}

// upgradeResult is the JSON line.
type upgradeResult struct {
	Cmd      string `json:"cmd"`
	Managers int    `json:"managers"`
	Workers  int    `json:"workers"`
	From     string `json:"from"`
	To       string `json:"to"`
	// The baseline: both groups rolled to a new template version, one
	// after the other (the managers first), on the previous release.
	RolloutS float64 `json:"rollout_s"`
	// `curator upgrade` to this checkout's release, and back.
	UpgradeS   float64 `json:"upgrade_s"`
	DowngradeS float64 `json:"downgrade_s"`
	// UpgradeRatio is upgrade_s / rollout_s.
	UpgradeRatio float64 `json:"upgrade_ratio"`
	// The management calls beside the upgrade and the downgrade (a node
	// list and a label update, every 100 ms, each within the client's
	// bounded wait): how many, how many failed, and the longest time
	// without an answer.
	Calls       int64   `json:"calls"`
	CallsFailed int64   `json:"calls_failed"`
	LongestGapS float64 `json:"longest_gap_s"`
	Error       string  `json:"error,omitempty"`
}

func newUpgradeCommand() *cobra.Command {
	c := &upgradeConfig{}
	cmd := &cobra.Command{
		Use:   "upgrade",
		Short: "Seconds of `curator upgrade` of a dev cluster to this release and back, against a plain rollout",
		Long: `Run 'curator dev' of the previous release (--from; default: built from this
repository's history, the commit in test/testdata/previous-release) with
--managers and --workers, roll both groups to a new template version (the
baseline), then 'curator upgrade' them to this checkout's release (--curator)
and back, with a node list and a label update every 100 ms beside. The last
line on stdout is one JSON object: the seconds of each, the upgrade's ratio to
the baseline, and the management calls that failed and the longest gap in
their answers.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c.managers < 1 || c.managers > maxManagers || c.workers < 1 || c.timeout <= 0 {
				return fmt.Errorf("--managers %d, --workers %d, --timeout %s: want 1 to %d managers, a worker or more, a positive timeout", c.managers, c.workers, c.timeout, maxManagers)
			}
			p := newProgress(cmd.ErrOrStderr())
			res := &upgradeResult{Cmd: "upgrade", Managers: c.managers, Workers: c.workers}
			var problems []error
			if err := measureUpgrade(cmd.Context(), c, p, res); err != nil {
				problems = append(problems, err)
			}
			return finish(cmd.OutOrStdout(), res, func(e string) { res.Error = e }, problems)
		},
	}
	cmd.Flags().StringVar(&c.curator, "curator", "", "the release to upgrade to (default: go build ./cmd/curator into a temporary dir)")
	cmd.Flags().StringVar(&c.from, "from", "", "the release the cluster starts on (default: the previous release, built from git history)")
	cmd.Flags().StringVar(&c.dir, "dir", "", "where the dev cluster and the binaries go, kept afterwards (default: a temporary dir, removed afterwards)")
	cmd.Flags().IntVar(&c.managers, "managers", DefaultUpgradeManagers, "consensus members")
	cmd.Flags().IntVar(&c.workers, "workers", DefaultUpgradeWorkers, "workers")
	cmd.Flags().StringVar(&c.addresses, "addresses", DefaultUpgradeAddresses, "loopback addresses FIRST-LAST for the dev cluster")
	cmd.Flags().DurationVar(&c.timeout, "timeout", DefaultRolloutTimeout, "how long each step may take")
	return cmd
}

func measureUpgrade(ctx context.Context, cfg *upgradeConfig, p *progress, res *upgradeResult) error {
	dir, cleanup, err := benchDir(cfg.dir, "upgrade")
	if err != nil {
		return err
	}
	defer cleanup()
	to, err := curatorBinary(ctx, cfg.curator, dir, p)
	if err != nil {
		return err
	}
	from := cfg.from
	if from == "" {
		p.printf("building the previous release from git history (cached after the first time)")
		if from, _, _, err = testenv.PreviousReleaseBinary(); err != nil {
			return err
		}
	}
	// Each release a file of its own: the process provider starts the
	// machines from the path the group names.
	if from, err = copyBinary(from, filepath.Join(dir, "curator-from")); err != nil {
		return err
	}
	if to, err = copyBinary(to, filepath.Join(dir, "curator-to")); err != nil {
		return err
	}
	if res.From, err = testenv.BinaryRelease(from); err != nil {
		return err
	}
	if res.To, err = testenv.BinaryRelease(to); err != nil {
		return err
	}
	c, stop, err := startDev(ctx, from, filepath.Join(dir, "dev"), cfg.managers, cfg.workers, cfg.addresses, cfg.timeout, p)
	if err != nil {
		return err
	}
	defer stop()
	config := filepath.Join(dir, "dev", client.ConfigFileName)

	b := &rolloutBench{c: c, timeout: cfg.timeout, p: p}
	start := time.Now()
	for _, group := range []string{"managers", "workers"} {
		if _, err := b.roll(ctx, group); err != nil {
			return fmt.Errorf("baseline rollout of %s: %w", group, err)
		}
	}
	res.RolloutS = secs(time.Since(start))

	calls := &callStream{c: c}
	stopCalls := calls.start(ctx)
	upgrade := func(bin string) (float64, error) {
		start := time.Now()
		ctx, cancel := context.WithTimeout(ctx, 2*cfg.timeout)
		defer cancel()
		out, err := exec.CommandContext(ctx, to, "--config", config, "upgrade", "--binary", bin).CombinedOutput()
		d := secs(time.Since(start))
		p.printf("upgrade to %s: %.1fs\n%s", bin, d, strings.TrimSpace(string(out)))
		if err != nil {
			return d, fmt.Errorf("curator upgrade --binary %s: %v: %s", bin, err, out)
		}
		return d, nil
	}
	res.UpgradeS, err = upgrade(to)
	if err == nil {
		res.DowngradeS, err = upgrade(from)
	}
	stopCalls()
	res.Calls, res.CallsFailed, res.LongestGapS = calls.n, calls.failed, secs(calls.longestGap)
	if res.RolloutS > 0 {
		res.UpgradeRatio = round3(res.UpgradeS / res.RolloutS)
	}
	if calls.failed > 0 {
		err = errors.Join(err, fmt.Errorf("%d of %d management calls failed, the first: %v", calls.failed, calls.n, calls.firstErr))
	}
	return err
}

// callStream makes a node list and a label update every 100 ms and keeps
// what failed and the longest time between two answers.
type callStream struct {
	c          *client.Client
	mu         sync.Mutex
	n, failed  int64
	firstErr   error
	last       time.Time
	longestGap time.Duration
}

func (s *callStream) start(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	s.last = time.Now()
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(upgradeCallEvery):
			}
			nodes, err := s.c.ListNodes(ctx)
			s.note(ctx, err)
			if err != nil || len(nodes) == 0 {
				continue
			}
			id := nodes[i%len(nodes)].GetNode().GetId()
			_, err = s.c.UpdateNode(ctx, id, client.NodeUpdate{LabelAdd: map[string]string{"seen": fmt.Sprint(i)}})
			if status.Code(err) == codes.NotFound {
				err = nil // replaced between the two calls
			}
			s.note(ctx, err)
		}
	}()
	return func() { cancel(); <-done }
}

func (s *callStream) note(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return // the stream's end, not the cluster's answer
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	now := time.Now()
	if err != nil {
		s.failed++
		if s.firstErr == nil {
			s.firstErr = err
		}
		return
	}
	s.longestGap = max(s.longestGap, now.Sub(s.last))
	s.last = now
}

// copyBinary copies bin to dst, executable, and returns dst.
func copyBinary(bin, dst string) (string, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	return dst, os.WriteFile(dst, data, 0o755)
}
