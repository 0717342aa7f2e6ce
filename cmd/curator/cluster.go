package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/curatorproject/curator/client"
	pb "github.com/curatorproject/curator/proto"
)

func newClusterCommand(g *globalFlags) *cobra.Command {
	return parentCommand("cluster", "Show and change cluster settings",
		newClusterInfoCommand(g),
		newClusterUpdateCommand(g),
		newClusterBackupCommand(g),
		newClusterAdminCertCommand(g),
	)
}

func newClusterInfoCommand(g *globalFlags) *cobra.Command {
	var format outputFormat
	c := &cobra.Command{
		Use:   "info",
		Short: "Show the cluster: leader, voters, quorum, settings and warnings",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withClient(cmd, func(ctx context.Context, c *client.Client) error {
				info, err := c.ClusterInfo(ctx)
				if err != nil {
					return apiError("cluster info", err)
				}
				return writeClusterInfo(cmd.OutOrStdout(), format, info)
			})
		},
	}
	addOutputFlag(c, &format)
	return c
}

func newClusterUpdateCommand(g *globalFlags) *cobra.Command {
	var (
		requireApproval bool
		maxVoters       uint32
		certTTL         time.Duration
		swarm           bool
		format          outputFormat
	)
	c := &cobra.Command{
		Use:   "update",
		Short: "Change cluster settings",
		Long: `Change the cluster settings whose flags are given, and leave the others as
they are; then print the cluster as cluster info does. Give at least one.

--swarm turns the Swarm flavor on: the leader keeps the Docker Swarm's
managers the consensus nodes, through its own node's engine, a Swarm
manager, and asks each agent run with --docker-socket whose engine is not in
the Swarm to join it as a worker (README, "Running over a Docker Swarm").`,
		Example: `  curator cluster update --require-approval=true
  curator cluster update --max-voters 5
  curator cluster update --cert-ttl 720h
  curator cluster update --swarm`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var u client.ClusterUpdate
			if cmd.Flags().Changed("require-approval") {
				u.RequireApproval = &requireApproval
			}
			if cmd.Flags().Changed("max-voters") {
				u.MaxVoters = &maxVoters
			}
			if cmd.Flags().Changed("cert-ttl") {
				u.CertTTL = &certTTL
			}
			if cmd.Flags().Changed("swarm") {
				u.Swarm = &swarm
			}
			return g.withChangeClient(cmd, func(ctx context.Context, c *client.Client) error {
				info, err := within(ctx, callTimeout, func(ctx context.Context) (*pb.ClusterInfo, error) {
					return c.UpdateCluster(ctx, u)
				})
				if err != nil {
					return apiError("update cluster", err)
				}
				return writeClusterInfo(cmd.OutOrStdout(), format, info)
			})
		},
	}
	c.Flags().BoolVar(&requireApproval, "require-approval", false, "whether a joining node waits for an operator's node approve (--require-approval=true|false)")
	c.Flags().Uint32Var(&maxVoters, "max-voters", 0, "the most etcd voters the cluster may have")
	c.Flags().DurationVar(&certTTL, "cert-ttl", 0, "how long node and etcd certificates issued from now on last (10s to 5 years; nodes renew at two thirds of it)")
	c.Flags().BoolVar(&swarm, "swarm", false, "the Swarm flavor (--swarm=true|false): the leader keeps the Docker Swarm's managers the consensus nodes, and asks each node's agent (run with --docker-socket) to join its engine to the Swarm")
	c.MarkFlagsOneRequired("require-approval", "max-voters", "cert-ttl", "swarm")
	addOutputFlag(c, &format)
	return c
}

// clusterInfoJSON is the cluster as `cluster info -o json` shows it. The
// field names are part of the CLI contract (docs/architecture.md): add, never rename.
// Lists are [] rather than null when empty.
type clusterInfoJSON struct {
	ClusterID       string            `json:"cluster_id"`
	Leader          string            `json:"leader"`
	Voters          []string          `json:"voters"`
	Learners        []string          `json:"learners"`
	EtcdLeader      string            `json:"etcd_leader"`
	QuorumHealthy   bool              `json:"quorum_healthy"`
	MaxVoters       uint32            `json:"max_voters"`
	RequireApproval bool              `json:"require_approval"`
	Warnings        []string          `json:"warnings"`
	Managers        []string          `json:"managers"`
	Version         string            `json:"version"`
	Names           map[string]string `json:"names"`
	// CertTTL is how long node and etcd certificates are issued for, as
	// a Go duration ("2160h0m0s").
	CertTTL string `json:"cert_ttl"`
	// Swarm: the Swarm flavor is on.
	Swarm bool `json:"swarm"`
}

func clusterInfoToJSON(info *pb.ClusterInfo) clusterInfoJSON {
	list := func(s []string) []string { return append([]string{}, s...) }
	j := clusterInfoJSON{
		ClusterID:       info.GetClusterId(),
		Leader:          info.GetLeader(),
		Voters:          list(info.GetVoters()),
		Learners:        list(info.GetLearners()),
		EtcdLeader:      info.GetEtcdLeader(),
		QuorumHealthy:   info.GetQuorumHealthy(),
		MaxVoters:       info.GetMaxVoters(),
		RequireApproval: info.GetRequireApproval(),
		Warnings:        list(info.GetWarnings()),
		Managers:        list(info.GetManagers()),
		Version:         info.GetVersion(),
		Names:           maps.Clone(info.GetNames()),
		Swarm:           info.GetSwarm(),
	}
	if d := info.GetCertTtl(); d != nil {
		j.CertTTL = d.AsDuration().String()
	}
	if j.Names == nil {
		j.Names = map[string]string{}
	}
	return j
}

// writeClusterInfo writes info as JSON, or as an aligned "key: value"
// listing with any warnings first, where they cannot be missed.
func writeClusterInfo(w io.Writer, format outputFormat, info *pb.ClusterInfo) error {
	j := clusterInfoToJSON(info)
	if format.structured() {
		return writeData(w, format, j)
	}
	for _, warning := range j.Warnings {
		if _, err := fmt.Fprintf(w, "WARNING: %s\n", warning); err != nil {
			return err
		}
	}
	if len(j.Warnings) > 0 {
		if _, err := fmt.Fprintln(w); err != nil {
			return err
		}
	}
	orNone := func(s string) string {
		if s == "" {
			return "(none)"
		}
		return s
	}
	yesNo := func(b bool, no string) string {
		if b {
			return "yes"
		}
		return no
	}
	// named shows a node as "name (id)" when its name is known and differs.
	named := func(ids ...string) string {
		out := make([]string, len(ids))
		for i, id := range ids {
			out[i] = id
			if name := j.Names[id]; name != "" && name != id {
				out[i] = name + " (" + id + ")"
			}
		}
		return strings.Join(out, ", ")
	}
	rows := [][]string{
		{"Cluster ID:", orNone(j.ClusterID)},
		{"Version:", orNone(j.Version)},
		{"Leader:", orNone(named(j.Leader))},
		{"etcd leader:", orNone(named(j.EtcdLeader))},
		{"Quorum healthy:", yesNo(j.QuorumHealthy, "NO")},
		{fmt.Sprintf("Voters (%d):", len(j.Voters)), orNone(named(j.Voters...))},
		{fmt.Sprintf("Learners (%d):", len(j.Learners)), orNone(named(j.Learners...))},
		{"Max voters:", strconv.FormatUint(uint64(j.MaxVoters), 10)},
		{"Require approval:", yesNo(j.RequireApproval, "no")},
		{"Certificate TTL:", orNone(j.CertTTL)},
		{"Managers:", orNone(strings.Join(j.Managers, ", "))},
	}
	if j.Swarm {
		rows = append(rows, []string{"Swarm flavor:", "on"})
	}
	return writeTable(w, rows)
}

func newClusterAdminCertCommand(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "admin-cert",
		Short: "Renew the admin certificate of the client config",
		Long: `Ask the cluster for a new admin certificate for the key of the client config
(--config), with the same name, and write it over the config's certificate
file. The key stays. Admin certificates last a year whatever the cluster's
cert_ttl: renew before the one in use expires, as an expired certificate
opens no connection.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := g.configPath()
			cfg, err := client.LoadConfig(path)
			if err != nil {
				return err
			}
			return g.withChangeClient(cmd, func(ctx context.Context, c *client.Client) error {
				cert, err := c.RenewAdminCert(ctx, cfg, path)
				if err != nil {
					return apiError("renew admin certificate", err)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "admin certificate renewed: expires %s\n", cert.NotAfter.UTC().Format(time.RFC3339))
				return err
			})
		},
	}
}
