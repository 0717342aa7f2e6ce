package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	pb "github.com/curatorproject/curator/proto"
)

// GroupsConfig is a cluster whose groups make its nodes: the first node is
// started with `agent init` (as a machine of the first group, by the
// Starter), the groups are committed, and the curator leader's group loop
// provisions the rest through each group's provider.
type GroupsConfig struct {
	// First is the first node; FirstArgs are its `agent init` arguments
	// (its name, cluster ID and group flags).
	First     Node
	FirstArgs []string
	Start     Starter
	// Groups are committed in order once the first node answers.
	Groups []*pb.GroupSpec
	// ClientConfig, if set, is where UpGroups writes a client config that
	// names every manager.
	ClientConfig string
	Progress     io.Writer
	StepTimeout  time.Duration
	Poll         time.Duration
}

// UpGroups brings the cluster of cfg up and returns once every group has
// its size of ready nodes.
func UpGroups(ctx context.Context, cfg GroupsConfig) (*Cluster, error) {
	if cfg.Start == nil || len(cfg.Groups) == 0 || !cfg.First.Manager {
		return nil, errors.New("local cluster: a starter, a first node that is a manager and at least one group are required")
	}
	r := &run{cfg: Config{Start: cfg.Start, Progress: cfg.Progress, StepTimeout: cfg.StepTimeout, Poll: cfg.Poll}.withDefaults(), procs: map[string]Process{}}
	_, adminCfg, err := r.init(ctx, Launch{Node: cfg.First, Verb: "init", Args: cfg.FirstArgs})
	if err != nil {
		return nil, err
	}
	defer r.cl.Close()
	for _, g := range cfg.Groups {
		if err := r.waitFor(ctx, "group "+g.Name+" to be committed", func(ctx context.Context) error {
			_, _, err := r.cl.CommitGroup(ctx, g)
			return err
		}); err != nil {
			return nil, err
		}
		nodes := "nodes"
		if g.Size == 1 {
			nodes = "node"
		}
		fmt.Fprintf(r.cfg.Progress, "committed group %s: %d %s\n", g.Name, g.Size, nodes)
	}
	var nodes []*pb.NodeView
	if err := r.waitFor(ctx, "every group's nodes to be ready", func(ctx context.Context) error {
		if nodes, err = r.cl.ListNodes(ctx); err != nil {
			return err
		}
		info, err := r.cl.ClusterInfo(ctx)
		if err != nil {
			return err
		}
		return groupsReady(cfg.Groups, nodes, info.GetVoters())
	}); err != nil {
		return nil, err
	}
	if cfg.ClientConfig != "" {
		info, err := r.cl.ClusterInfo(ctx)
		if err != nil {
			return nil, err
		}
		if err := writeClientConfig(adminCfg, cfg.ClientConfig, info.GetManagers()); err != nil {
			return nil, err
		}
	}
	return &Cluster{Procs: r.procs, AdminConfig: adminCfg, Nodes: nodes}, nil
}

// groupsReady says which groups do not have their size of ready nodes:
// for a group of the consensus role, ready etcd voters (a learner that is
// still catching up is not a manager yet: a cluster called up with one
// would lose its quorum to the first manager killed).
func groupsReady(groups []*pb.GroupSpec, nodes []*pb.NodeView, voters []string) error {
	var short []string
	for _, g := range groups {
		consensus := slices.Contains(g.GetRoles(), pb.Role_ROLE_CONSENSUS)
		ready := 0
		for _, v := range nodes {
			n := v.GetNode()
			if n.GetGroup() == g.Name && n.GetStatus() == pb.NodeStatus_NODE_STATUS_READY && (!consensus || slices.Contains(voters, n.GetId())) {
				ready++
			}
		}
		if ready < int(g.Size) {
			short = append(short, fmt.Sprintf("%s %d/%d", g.Name, ready, g.Size))
		}
	}
	if len(short) > 0 {
		slices.Sort(short)
		return fmt.Errorf("groups not ready: %s", strings.Join(short, ", "))
	}
	return nil
}
