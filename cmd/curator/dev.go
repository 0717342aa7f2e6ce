package main

// `curator dev`: a whole local cluster on loopback addresses, made of
// processes of this same binary, instances of the process provider
// (provider/process) on DIR. dev starts the first node itself, with `agent
// init`, as a machine of the group `managers`; then it commits the groups
// `managers` and `workers` on the same provider, and the curator leader's
// group loop makes the other nodes (internal/localcluster.UpGroups), and
// keeps making them: a node killed for good is replaced. When dev ends it
// stops the instances and keeps them; the next dev on DIR starts them again
// with `agent run`.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/curatorproject/curator/client"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/internal/localcluster"
	"github.com/curatorproject/curator/node"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/provider"
	"github.com/curatorproject/curator/provider/docker"
	"github.com/curatorproject/curator/provider/process"
)

// Defaults and limits of `curator dev`.
const (
	devDefaultAddresses = "127.0.100.10-127.0.100.250"
	devPort             = 7000
	devMaxManagers      = 7
	// devStopGrace is how long nodes get to stop after SIGTERM before
	// they are killed.
	devStopGrace = 10 * time.Second
	// devWatchEvery is how often dev looks for nodes that have exited
	// while the cluster runs.
	devWatchEvery = time.Second
	// The groups of a dev cluster.
	devManagers = "managers"
	devWorkers  = "workers"
	// devOldNodesDir held the nodes' data dirs before dev ran them on the
	// process provider.
	devOldNodesDir = "nodes"
)

// devConfig is what the flags of `curator dev` fill.
type devConfig struct {
	managers  int
	workers   int
	dir       string
	addresses string
	// domains, when not 0, splits addresses into that many failure
	// domains (dev_domains.go).
	domains int
	// provider is "process" or "docker"; network, subnet and image are
	// the docker provider's.
	provider, network, subnet, image string
	// forceNewCluster: the dev cluster in dir lost its quorum for good
	// (managers killed); its one manager left is restarted with `agent
	// run --force-new-cluster` (see devForced).
	forceNewCluster bool
	// given: the flags given on the command line, by name.
	given map[string]bool
}

// Validate checks the flags: the address range must hold a node each.
func (c *devConfig) Validate() error {
	if c.managers < 1 || c.managers > devMaxManagers {
		return fmt.Errorf("--managers %d: want 1 to %d", c.managers, devMaxManagers)
	}
	if c.workers < 0 {
		return fmt.Errorf("--workers %d: want 0 or more", c.workers)
	}
	switch c.provider {
	case "process":
		if _, err := process.AddressRange(c.addresses, c.managers+c.workers); err != nil {
			return fmt.Errorf("--addresses %q: %w", c.addresses, err)
		}
		if err := c.validateDomains(); err != nil {
			return err
		}
	case "docker":
		if c.domains != 0 {
			return errors.New("--domains splits the process provider's --addresses: with --provider docker, name the engines of a group's domains in its file (docs/containers.md)")
		}
		// The docker provider checks its settings when dev makes it.
	default:
		return fmt.Errorf("--provider %q: want process or docker", c.provider)
	}
	if c.forceNewCluster && (c.dir == "" || c.provider != "process") {
		return errors.New("--force-new-cluster restarts the dev cluster in --dir, on the process provider: give the --dir of that cluster")
	}
	return nil
}

func newDevCommand() *cobra.Command {
	c := &devConfig{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local cluster of several processes",
		Long: `Run a whole cluster on this machine: --managers consensus members and
--workers workers, each a 'curator agent' process on its own loopback address
(port 7000) out of --addresses. dev starts the first manager, then commits two
groups, managers and workers, on the process provider in DIR; the curator
leader makes the other nodes, and replaces any that dies for good. Each node is
an instance in DIR: its data dir is DIR/instances/ID/data and its log
DIR/instances/ID/agent.log, and it is named GROUP-ID. The client config is
written to DIR/config.yaml. With --domains N, --addresses is split into N
ranges, the failure domains a, b, c, ...: the groups spread their nodes over
them, and 'node ls' shows each node's domain. dev stays in the foreground and
stops every node on Ctrl-C or SIGTERM, keeping them. A live dev holds DIR
(DIR/dev.lock, with its pid): a second dev on DIR is refused. dev stops when
the process that started it ends, except under nohup: 'nohup curator dev --dir
DIR >DIR.log 2>&1 &' outlives its shell.

dev records what it made the cluster with in DIR/dev.json. Run again with
the same --dir, dev restarts the nodes found there from disk, as the cluster
was made (a flag given that disagrees with DIR/dev.json is refused): the
stopped ones, those left running by a dev that was killed (stopped and started
again), and those that died without being stopped (a power loss, a reboot, a
kill of every process). A node killed while dev ran whose group replaced it is
gone from the cluster, and its dir with it. A dir that holds a cluster (a
client config, a CA, DIR/dev.json) and no node to start is refused, never made
into a new cluster. If the managers lost their quorum for good (2 of 3 dirs
lost, say), run with --force-new-cluster: the one manager left restarts with
'agent run --force-new-cluster' and leads alone, and the managers group makes
the others again (see docs/disaster-recovery.md).

With --provider docker the nodes are containers of --image on the Docker
network --network (--subnet, created if missing), the groups are on the docker
provider, and the managers' containers get the Docker socket so that whichever
leads can make containers. The first manager's data dir is DIR/instances/ID,
bind-mounted. Ctrl-C or SIGTERM removes every container of the network; node
logs are 'docker logs ID'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.Validate(); err != nil {
				return err
			}
			c.given = map[string]bool{}
			cmd.Flags().Visit(func(f *pflag.Flag) { c.given[f.Name] = true })
			devFollowParent()
			if c.provider == "docker" {
				return runDevDocker(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), c)
			}
			return runDev(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), c)
		},
	}
	cmd.Flags().IntVar(&c.managers, "managers", 3, "consensus members (1 to 7)")
	cmd.Flags().IntVar(&c.workers, "workers", 2, "workers")
	cmd.Flags().StringVar(&c.dir, "dir", "", "where the nodes keep their data dirs and logs (default: a new temporary dir)")
	cmd.Flags().StringVar(&c.addresses, "addresses", devDefaultAddresses, "loopback addresses for the nodes, FIRST-LAST (process provider)")
	cmd.Flags().IntVar(&c.domains, "domains", 0, "split --addresses into this many failure domains, a, b, c, ... (2 to 16; process provider), over which the groups spread")
	cmd.Flags().StringVar(&c.provider, "provider", "process", "process (nodes as processes on loopback addresses) or docker (nodes as containers; build the image first with 'make image')")
	cmd.Flags().StringVar(&c.network, "network", devDockerNetwork, "the Docker network of the containers (docker provider)")
	cmd.Flags().StringVar(&c.subnet, "subnet", devDockerSubnet, "the Docker network's subnet (docker provider)")
	cmd.Flags().StringVar(&c.image, "image", docker.DefaultImage, "the image the containers run (docker provider)")
	cmd.Flags().BoolVar(&c.forceNewCluster, "force-new-cluster", false, "restart the cluster in --dir whose managers lost their quorum for good: its one manager left runs with 'agent run --force-new-cluster'")
	return cmd
}

func runDev(ctx context.Context, stdout, stderr io.Writer, c *devConfig) (err error) {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this binary: %w", err)
	}
	dir, lock, err := c.openDir()
	if err != nil {
		return err
	}
	defer lock.Close()
	settings, err := loadDevSettings(dir)
	if err != nil {
		return err
	}
	if settings != nil {
		if err := settings.apply(c, dir); err != nil {
			return err
		}
	}
	// The machines and the groups start a copy kept in DIR, not this
	// binary, which may be go run's, deleted when go run exits.
	if self, err = devBinaryCopy(self, dir); err != nil {
		return err
	}
	if node.Initialised(filepath.Join(dir, devOldNodesDir, "manager-1")) {
		return fmt.Errorf("%s holds a dev cluster of an older layout (%s/NAME): remove it or choose another --dir", dir, filepath.Join(dir, devOldNodesDir))
	}
	// The whole range: the groups' provider, in the leader, hands the
	// addresses out of it too, and dev restarts nodes on theirs.
	pcfg := process.Config{
		Dir:         dir,
		Binary:      self,
		StopTimeout: devStopGrace,
		Logger:      devLogger(stderr),
	}
	if pcfg.Addresses, pcfg.Domains, err = c.pools(); err != nil {
		return err
	}
	p, err := process.New(pcfg)
	if err != nil {
		return err
	}
	dc := &devCluster{p: p, dir: dir, stderr: stderr}
	defer func() {
		if stopErr := dc.stop(); err == nil {
			err = stopErr
		}
	}()
	cfgPath := filepath.Join(dir, client.ConfigFileName)

	var cl *localcluster.Cluster
	// Only what crashed Provisions left: an instance that ran and died
	// keeps its dir (a power loss kills every one), and what its group
	// replaced while dev ran is gone already (the group loop clears a
	// dead machine once its node is removed).
	if _, err := p.Prune(ctx); err != nil {
		return err
	}
	running, stopped, dead, err := dc.recorded(ctx)
	if err != nil {
		return err
	}
	if len(running) > 0 {
		verb := "are"
		if len(running) == 1 {
			verb = "is"
		}
		fmt.Fprintf(stderr, "%s of %s %s still running (was an earlier dev killed?): stopping them first\n", count(len(running), "node"), dir, verb)
		if err := dc.stopAll(running); err != nil {
			return err
		}
		stopped = append(stopped, running...)
	}
	switch {
	case c.forceNewCluster && len(stopped)+len(dead) == 0:
		return fmt.Errorf("--force-new-cluster: %s holds no dev cluster to restart", dir)
	case len(stopped)+len(dead) > 0:
		cl, err = dc.restart(ctx, cfgPath, settings, stopped, dead, c.forceNewCluster)
	default:
		if found := devHolds(dir); len(found) > 0 {
			return errDevHoldsCluster(dir, found)
		}
		if err := devSettingsOf(c).save(dir); err != nil {
			return fmt.Errorf("record dev's settings in %s: %w", dir, err)
		}
		fmt.Fprintf(stderr, "starting %s and %s%s\n", count(c.managers, "manager"), count(c.workers, "worker"), c.domainsWords())
		if cl, err = dc.up(ctx, c, self, cfgPath, stderr); err != nil && dc.empty(ctx) {
			// Nothing was made: the dir holds no cluster.
			os.Remove(filepath.Join(dir, devSettingsFile))
		}
	}
	if err != nil {
		return err
	}
	if err := writeNodes(stdout, formatTable, cl.Nodes); err != nil {
		return err
	}
	again := selfCommand()
	fmt.Fprintf(stdout, "\nCluster running in %s, its nodes made by the groups managers and workers. Node logs:\n", dir)
	dc.writeLogs(ctx, stdout)
	printDevUsage(stdout, cfgPath, fmt.Sprintf("Press Ctrl-C to stop every node; run '%s dev --dir %s' to start them again.", again, shellQuote(dir)))
	dc.watch(ctx)
	fmt.Fprintln(stderr, "stopping every node")
	return nil
}

// devCluster is the nodes of one `curator dev`: instances of the process
// provider on DIR, made by dev (the first) or by the groups.
type devCluster struct {
	p      *process.Provider
	dir    string
	stderr io.Writer
	// firstLabels are the labels of the first node, which dev starts,
	// and firstDomain its failure domain (none, or one).
	firstLabels map[string]string
	firstDomain string
}

// devLogger writes the provider's warnings (a node killed after it ignored
// SIGTERM) to stderr.
func devLogger(stderr io.Writer) *zap.Logger {
	enc := zap.NewDevelopmentEncoderConfig()
	enc.TimeKey = ""
	return zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(stderr), zapcore.WarnLevel))
}

// devGroups are the groups of a new dev cluster: managers (consensus
// members that also take work) and workers, on the provider prov makes.
func devGroups(c *devConfig, prov func() *pb.ProviderSpec) []*pb.GroupSpec {
	groups := []*pb.GroupSpec{
		{Name: devManagers, Size: uint32(c.managers), Roles: []pb.Role{pb.Role_ROLE_CONSENSUS, pb.Role_ROLE_WORKER}, Provider: prov(), Template: &pb.InstanceTemplate{Version: "dev"}},
		{Name: devWorkers, Size: uint32(c.workers), Roles: []pb.Role{pb.Role_ROLE_WORKER}, Provider: prov(), Template: &pb.InstanceTemplate{Version: "dev"}},
	}
	for _, g := range groups {
		spec.NormalizeGroupSpec(g)
	}
	return groups
}

// up brings a new dev cluster up on the process provider.
func (dc *devCluster) up(ctx context.Context, c *devConfig, self, cfgPath string, progress io.Writer) (*localcluster.Cluster, error) {
	ranges, err := c.ranges()
	if err != nil {
		return nil, err
	}
	groups := devGroups(c, func() *pb.ProviderSpec {
		p := &pb.ProcessProviderSpec{Port: devPort, Dir: dc.dir, Binary: self, Domains: maps.Clone(ranges)}
		if len(ranges) == 0 {
			p.Addresses = c.addresses
		}
		return &pb.ProviderSpec{Kind: &pb.ProviderSpec_Process{Process: p}}
	})
	// The first manager goes to the first domain, as the group's
	// placement would put it.
	if d := groups[0].GetDomains(); len(d) > 0 {
		dc.firstDomain = d[0]
	}
	return devUp(ctx, groups, dc.p, cfgPath, progress, func(labels map[string]string) localcluster.Starter {
		dc.firstLabels = labels
		return dc.start
	})
}

// devUp brings a new dev cluster up: the first manager as a machine of
// the managers group, labelled with the ID of the cluster it is to create
// (starter gets the labels and returns what starts it), then the groups.
// The groups' templates record what runs (runs: the provider dev and the
// groups share), as the leader does at a commit, so the first manager's
// config SHA is the one its group is committed with.
func devUp(ctx context.Context, groups []*pb.GroupSpec, runs provider.Runner, cfgPath string, progress io.Writer, starter func(labels map[string]string) localcluster.Starter) (*localcluster.Cluster, error) {
	clusterID, err := spec.NewClusterID()
	if err != nil {
		return nil, err
	}
	r, err := runs.Runs(ctx)
	if err != nil {
		return nil, err
	}
	for _, g := range groups {
		g.Template.Release = spec.ReleaseOf(g, r.Image, r.Digest)
	}
	sha := spec.GroupConfigSHA(groups[0].Template)
	start := starter(map[string]string{
		provider.LabelCluster: clusterID, provider.LabelGroup: devManagers, provider.LabelConfigSHA: sha,
	})
	return localcluster.UpGroups(ctx, localcluster.GroupsConfig{
		First: localcluster.Node{Name: "the first manager", Manager: true},
		FirstArgs: []string{
			"--name", devManagers + "-" + provider.PlaceholderInstanceID, "--cluster-id", clusterID,
			"--group", devManagers, "--instance-id", provider.PlaceholderInstanceID, "--config-sha", sha,
		},
		Start:        start,
		Groups:       groups,
		ClientConfig: cfgPath,
		Progress:     progress,
	})
}

// recorded returns the instances a dev before this one left in the dir:
// those still running (that dev was killed), those stopped, and those
// that died without being stopped (a power loss).
func (dc *devCluster) recorded(ctx context.Context) (running, stopped, dead []provider.Instance, err error) {
	if running, err = dc.p.List(ctx, nil); err != nil {
		return nil, nil, nil, err
	}
	if dead, err = dc.p.ListDead(ctx, nil); err != nil {
		return nil, nil, nil, err
	}
	all, err := dc.p.ListStopped(ctx, nil)
	for _, in := range all {
		if !slices.ContainsFunc(dead, func(d provider.Instance) bool { return d.ID == in.ID }) {
			stopped = append(stopped, in)
		}
	}
	return running, stopped, dead, err
}

// empty says whether the dir holds no instance at all.
func (dc *devCluster) empty(ctx context.Context) bool {
	running, stopped, dead, err := dc.recorded(ctx)
	return err == nil && len(running)+len(stopped)+len(dead) == 0
}

// start is dev's localcluster.Starter, for the first node: it provisions
// it as a machine of the managers group.
func (dc *devCluster) start(ctx context.Context, l localcluster.Launch) (localcluster.Process, error) {
	in, err := dc.p.Provision(ctx, provider.Spec{
		Labels: dc.firstLabels,
		Args:   append([]string{"agent", l.Verb, "--data-dir", provider.PlaceholderDataDir, "--listen", provider.PlaceholderAddress}, l.Args...),
		Env:    l.Env,
		Domain: dc.firstDomain,
	})
	if err != nil {
		return nil, err
	}
	return &devProcess{p: dc.p, in: in}, nil
}

// nodeName is the name of the node of instance in: its group's name and
// its ID, as the group loop names the nodes it makes.
func nodeName(in provider.Instance) string { return in.Labels[provider.LabelGroup] + "-" + in.ID }

// byNodeName orders instances by node name.
func byNodeName(a, b provider.Instance) int { return strings.Compare(nodeName(a), nodeName(b)) }

// restart starts every recorded node again with `agent run`, together, and
// waits until they are ready: the stopped ones and the dead ones (which
// died without being stopped), as a clean stop and restart would. With
// forced, the one manager left runs with --force-new-cluster (devForced),
// and the managers given up for it are not started.
func (dc *devCluster) restart(ctx context.Context, cfgPath string, settings *devSettings, stopped, dead []provider.Instance, forced bool) (*localcluster.Cluster, error) {
	survivor := ""
	var givenUp []string
	if forced {
		var err error
		if survivor, givenUp, err = devForced(stopped, dead); err != nil {
			return nil, err
		}
	}
	all := slices.Concat(stopped, dead)
	if settings != nil {
		fmt.Fprintf(dc.stderr, "%s holds the dev cluster made with %s (%s): restarting its %s from disk (the groups keep their specs, each node its address)\n",
			dc.dir, settings.flags(), filepath.Join(dc.dir, devSettingsFile), count(len(all)-len(givenUp), "node"))
	} else {
		fmt.Fprintf(dc.stderr, "%s already holds a dev cluster: restarting its %s from disk (--managers, --workers and --addresses are ignored: the groups keep their specs, each node its address)\n", dc.dir, count(len(all)-len(givenUp), "node"))
	}
	if len(dead) > 0 {
		fmt.Fprintf(dc.stderr, "%s of %s died without being stopped (power loss?): starting them again\n", count(len(dead), "node"), dc.dir)
	}
	slices.SortFunc(all, byNodeName)
	procs := map[string]localcluster.Process{}
	for _, in := range all {
		if slices.Contains(givenUp, in.ID) {
			fmt.Fprintf(dc.stderr, "not starting %s, a manager that died: the new cluster refuses it, and the managers group replaces it (its dir goes once its node is removed)\n", nodeName(in))
			continue
		}
		if !node.Initialised(dc.p.DataDir(in.ID)) {
			// `agent run` would exit at once: a machine that died (or
			// was stopped) before its node joined. Its group clears it.
			fmt.Fprintf(dc.stderr, "not starting %s: it never joined (its data dir holds no node)\n", nodeName(in))
			continue
		}
		args := []string{"agent", "run", "--data-dir", provider.PlaceholderDataDir}
		if in.ID == survivor {
			args = append(args, "--force-new-cluster")
			fmt.Fprintf(dc.stderr, "forcing a new cluster on %s, the one manager left: it leads alone, the dead managers are refused, and the managers group makes new ones\n", nodeName(in))
		}
		in, err := dc.p.Start(ctx, in.ID, args, nil)
		if errors.Is(err, process.ErrAddressTaken) {
			// A dead machine whose address another holds: its group
			// replaced it there.
			fmt.Fprintf(dc.stderr, "not starting %s: %v\n", nodeName(in), err)
			continue
		}
		if err != nil {
			return nil, err
		}
		pr := &devProcess{p: dc.p, in: in}
		procs[nodeName(in)] = pr
		fmt.Fprintf(dc.stderr, "started %s on %s (log: %s)\n", nodeName(in), pr.Address(), pr.LogFile())
	}
	cl, err := localcluster.Resume(ctx, localcluster.Config{Progress: dc.stderr}, cfgPath, procs)
	return cl, devRestartQuorumAdvice(dc.dir, err)
}

// devForced returns the instance of the one manager left, which `dev
// --force-new-cluster` restarts with `agent run --force-new-cluster`, and
// the managers given up for it, not to be started: the one manager among
// stopped and dead, or else the one stopped on purpose when the others
// died (killed while dev ran: the operator gives them up). It refuses
// when no manager is left (restore a backup instead) or more than one
// could be the survivor: only one may be forced, and with two of three
// left the quorum is not lost at all.
func devForced(stopped, dead []provider.Instance) (string, []string, error) {
	managersOf := func(instances []provider.Instance) []provider.Instance {
		var out []provider.Instance
		for _, in := range instances {
			if in.Labels[provider.LabelGroup] == devManagers {
				out = append(out, in)
			}
		}
		slices.SortFunc(out, byNodeName)
		return out
	}
	kept, died := managersOf(stopped), managersOf(dead)
	all := slices.Concat(kept, died)
	switch {
	case len(all) == 0:
		return "", nil, errors.New("--force-new-cluster: no manager is left to force a new cluster on: restore a backup instead (`curator agent restore`)")
	case len(all) == 1:
		return all[0].ID, nil, nil
	case len(kept) == 1:
		var givenUp []string
		for _, in := range died {
			givenUp = append(givenUp, in.ID)
		}
		return kept[0].ID, givenUp, nil
	}
	names := make([]string, len(all))
	for i, in := range all {
		names[i] = nodeName(in)
	}
	slices.Sort(names)
	return "", nil, fmt.Errorf("--force-new-cluster: %d managers are left (%s), and a new cluster is forced on one survivor only: start dev without --force-new-cluster if they hold a quorum (those that died without being stopped come back with their data), or remove the instance dirs (DIR/instances/ID) of all but one first",
		len(names), strings.Join(names, ", "))
}

// writeLogs writes a line a running node: its name and the path of its
// log.
func (dc *devCluster) writeLogs(ctx context.Context, w io.Writer) {
	running, err := dc.p.List(ctx, nil)
	if err != nil {
		return
	}
	slices.SortFunc(running, byNodeName)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, in := range running {
		fmt.Fprintf(tw, "  %s\t%s\n", nodeName(in), dc.p.LogFile(in.ID))
	}
	tw.Flush()
}

// watch says on stderr when a node exits, and when a group makes one,
// while the cluster runs (someone may be testing a failure on purpose, so
// dev carries on), until ctx ends.
func (dc *devCluster) watch(ctx context.Context) {
	tick := time.NewTicker(devWatchEvery)
	defer tick.Stop()
	known := map[string]provider.Instance{}
	if running, err := dc.p.List(ctx, nil); err == nil {
		for _, in := range running {
			known[in.ID] = in
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		running, err := dc.p.List(ctx, nil)
		if err != nil {
			continue
		}
		now := map[string]provider.Instance{}
		for _, in := range running {
			now[in.ID] = in
			if _, ok := known[in.ID]; !ok {
				fmt.Fprintf(dc.stderr, "%s started on %s by its group (log: %s)\n", nodeName(in), in.Address, dc.p.LogFile(in.ID))
			}
		}
		for id, in := range known {
			if _, ok := now[id]; !ok {
				fmt.Fprintf(dc.stderr, "%s exited; see %s (once its group has replaced it and cleared its dir: %s)\n", nodeName(in), dc.p.LogFile(id), filepath.Join(dc.p.PrunedLogDir(), id+".log"))
			}
		}
		known = now
	}
}

// stop stops every running node and keeps it, for the next dev on the dir.
func (dc *devCluster) stop() error {
	running, err := dc.p.List(context.Background(), nil) // dev's own context has ended
	if err != nil {
		return err
	}
	return dc.stopAll(running)
}

// stopAll stops the instances and keeps them: the managers together first,
// so that the quorum goes at once and no leader is left to take a stopping
// worker for a dead one and replace it; then the workers together. The
// provider kills a node still running devStopGrace after its SIGTERM.
func (dc *devCluster) stopAll(instances []provider.Instance) error {
	return managersFirst(instances, func(id string) error { return dc.p.Stop(context.Background(), id) })
}

// managersFirst calls fn on every instance, the managers group's together
// first (so that the quorum goes at once, and no leader is left to replace
// the others), then the rest together.
func managersFirst(instances []provider.Instance, fn func(id string) error) error {
	var managers, others []string
	for _, in := range instances {
		if in.Labels[provider.LabelGroup] == devManagers {
			managers = append(managers, in.ID)
		} else {
			others = append(others, in.ID)
		}
	}
	var errs []error
	var mu sync.Mutex
	for _, ids := range [][]string{managers, others} {
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Go(func() {
				if err := fn(id); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	return errors.Join(errs...)
}

// devProcess is one of dev's nodes, as localcluster sees it.
type devProcess struct {
	p  *process.Provider
	in provider.Instance
}

func (d *devProcess) Address() string { return d.in.Address }
func (d *devProcess) DataDir() string { return d.p.DataDir(d.in.ID) }
func (d *devProcess) LogFile() string { return d.p.LogFile(d.in.ID) }

// Exited says the process has gone when the provider no longer lists the
// instance as running (the provider keeps no exit status).
func (d *devProcess) Exited() error {
	running, err := d.p.List(context.Background(), nil)
	if err != nil || slices.ContainsFunc(running, func(in provider.Instance) bool { return in.ID == d.in.ID }) {
		return nil
	}
	return errors.New("its process is gone")
}

// Removed says the provider holds no record of the instance, running or
// not: its group destroyed it on purpose (a rollout that was under way
// when the cluster stopped replaced it as dev brought it back), where a
// process that died keeps its record.
func (d *devProcess) Removed() bool {
	ctx := context.Background()
	running, err := d.p.List(ctx, nil)
	if err != nil {
		return false
	}
	stopped, err := d.p.ListStopped(ctx, nil)
	if err != nil {
		return false
	}
	mine := func(in provider.Instance) bool { return in.ID == d.in.ID }
	return !slices.ContainsFunc(running, mine) && !slices.ContainsFunc(stopped, mine)
}

// printDevUsage prints how to use a dev cluster, the commands written the
// way this binary was started, and how it stops.
func printDevUsage(w io.Writer, cfgPath, stop string) {
	again := selfCommand()
	fmt.Fprintf(w, `
  export CURATOR_CONFIG=%s
  %s node ls
  %s group ls

%s
`, shellQuote(cfgPath), again, again, stop)
}
