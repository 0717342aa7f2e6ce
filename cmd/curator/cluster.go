package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/curatorproject/curator/client"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

func newClusterCommand(g *globalFlags) *cobra.Command {
	return parentCommand("cluster", "Show and change cluster settings",
		newClusterInfoCommand(g),
		newClusterUpdateCommand(g),
		newClusterBackupCommand(g),
		newClusterAdminCertCommand(g),
		newClusterCertsCommand(g),
		newClusterRevokeCertCommand(g),
	)
}

func newClusterInfoCommand(g *globalFlags) *cobra.Command {
	var format outputFormat
	c := &cobra.Command{
		Use:   "info",
		Short: "Show the cluster: leader, voters, quorum, settings and warnings",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return showAnswer(g, cmd, "cluster info", (*client.Client).ClusterInfo, func(_ context.Context, _ *client.Client, out io.Writer, info *pb.ClusterInfo) error {
				return writeClusterInfo(out, format, info)
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
the Swarm to join it as a worker (docs/swarm.md).`,
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
	// Releases counts the nodes running each release ("" for those
	// that reported none); LowestManagerRelease is the lowest among the
	// managers. Both empty from a leader that does not report them.
	Releases             map[string]uint32 `json:"releases"`
	LowestManagerRelease string            `json:"lowest_manager_release"`
	// StorageVersion is the layout of the records in etcd (0 from a
	// leader that does not report it).
	StorageVersion uint32 `json:"storage_version"`
}

func clusterInfoToJSON(info *pb.ClusterInfo) clusterInfoJSON {
	list := func(s []string) []string { return append([]string{}, s...) }
	j := clusterInfoJSON{
		ClusterID:            info.GetClusterId(),
		Leader:               info.GetLeader(),
		Voters:               list(info.GetVoters()),
		Learners:             list(info.GetLearners()),
		EtcdLeader:           info.GetEtcdLeader(),
		QuorumHealthy:        info.GetQuorumHealthy(),
		MaxVoters:            info.GetMaxVoters(),
		RequireApproval:      info.GetRequireApproval(),
		Warnings:             list(info.GetWarnings()),
		Managers:             list(info.GetManagers()),
		Version:              info.GetVersion(),
		Names:                maps.Clone(info.GetNames()),
		Swarm:                info.GetSwarm(),
		Releases:             maps.Clone(info.GetReleases()),
		LowestManagerRelease: info.GetLowestManagerRelease(),
		StorageVersion:       info.GetStorageVersion(),
	}
	if j.Releases == nil {
		j.Releases = map[string]uint32{}
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
	if len(j.Releases) > 0 {
		rows = slices.Insert(rows, 2, []string{"Releases:", releasesLine(j.Releases)},
			[]string{"Lowest manager:", orNone(j.LowestManagerRelease)})
	}
	if j.StorageVersion > 0 {
		rows = slices.Insert(rows, min(len(rows), 2+2*min(len(j.Releases), 1)), []string{"Storage version:", strconv.FormatUint(uint64(j.StorageVersion), 10)})
	}
	if j.Swarm {
		rows = append(rows, []string{"Swarm flavor:", "on"})
	}
	return writeTable(w, rows)
}

// releasesLine lists the releases running, newest first, each with its
// count of nodes: "v0.2.0 (3 nodes), v0.1.0 (1 node)".
func releasesLine(releases map[string]uint32) string {
	names := slices.SortedFunc(maps.Keys(releases), func(a, b string) int { return spec.CompareReleases(b, a) })
	parts := make([]string, len(names))
	for i, r := range names {
		nodes := "nodes"
		if releases[r] == 1 {
			nodes = "node"
		}
		parts[i] = fmt.Sprintf("%s (%d %s)", cmp.Or(r, "unreported"), releases[r], nodes)
	}
	return strings.Join(parts, ", ")
}

func newClusterAdminCertCommand(g *globalFlags) *cobra.Command {
	var (
		role, name, out string
		ttl             time.Duration
	)
	c := &cobra.Command{
		Use:   "admin-cert",
		Short: "Issue an operator certificate, or renew the one of the client config",
		Long: `With --role or --name: issue an operator certificate for a new key, for the
person or screen --name with the operator role --role (reader, operator or
admin; see docs/operators.md), lasting --ttl (a year unless
given), and write a client config that uses it into --out (./NAME unless
given): config.yaml, ca.crt, admin.crt and admin.key. Hand that folder over;
use it with --config DIR/config.yaml. cluster certs lists what was issued,
cluster revoke-cert revokes one.

Without them: ask the cluster for a new certificate for the key of the
client config (--config), with the same name and role, and write it over
the config's certificate file. The key stays. Admin certificates last a year
whatever the cluster's cert_ttl: renew before the one in use expires, as an
expired certificate opens no connection.

Issuing needs the admin role. Any certificate may renew itself, whatever its
role: the same name and role, lasting what the one in use was issued for.`,
		Example: `  curator cluster admin-cert --role reader --name wall-screen
  curator cluster admin-cert --role operator --name alice --ttl 720h --out ./alice
  curator cluster admin-cert`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := g.configPath()
			cfg, err := client.LoadConfig(path)
			if err != nil {
				return err
			}
			issue := cmd.Flags().Changed("role") || cmd.Flags().Changed("name")
			if !issue {
				if cmd.Flags().Changed("ttl") || cmd.Flags().Changed("out") {
					return fmt.Errorf("--ttl and --out are for a new certificate: give --role and --name")
				}
				return g.withChangeClient(cmd, func(ctx context.Context, c *client.Client) error {
					cert, err := c.RenewAdminCert(ctx, cfg, path)
					if err != nil {
						return apiError("renew admin certificate", err)
					}
					_, err = fmt.Fprintf(cmd.OutOrStdout(), "admin certificate renewed: expires %s\n", cert.NotAfter.UTC().Format(time.RFC3339))
					return err
				})
			}
			if name == "" {
				return fmt.Errorf("--name is required with --role: whom the certificate is for")
			}
			if err := spec.ValidateNodeName(name); err != nil {
				return fmt.Errorf("--name: %w", err)
			}
			if _, err := pki.ParseOperatorRole(role); err != nil {
				return fmt.Errorf("--role: %w", err)
			}
			if out == "" {
				out = name
			}
			return g.withChangeClient(cmd, func(ctx context.Context, c *client.Client) error {
				cert, cfgPath, err := c.IssueAdminCert(ctx, cfg, name, role, ttl, out)
				if err != nil {
					return apiError("issue admin certificate", err)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "issued %s certificate for %s: serial %s, expires %s\nclient config: %s\n",
					withArticle(role), name, cert.SerialNumber.Text(16), cert.NotAfter.UTC().Format(time.RFC3339), cfgPath)
				return err
			})
		},
	}
	c.Flags().StringVar(&role, "role", pki.OperatorAdmin, "the operator role of a new certificate: reader, operator or admin")
	c.Flags().StringVar(&name, "name", "", "whom a new certificate is for (its common name)")
	c.Flags().DurationVar(&ttl, "ttl", 0, "how long a new certificate lasts (1m to 5 years; a year unless given)")
	c.Flags().StringVar(&out, "out", "", "the folder to write the new client config into (./NAME unless given)")
	_ = c.RegisterFlagCompletionFunc("role", cobra.FixedCompletions(pki.OperatorRoles, cobra.ShellCompDirectiveNoFileComp))
	return c
}

// adminCertJSON is an issued certificate as `cluster certs -o json` shows
// it. The field names are part of the CLI contract.
type adminCertJSON struct {
	Name      string     `json:"name"`
	Role      string     `json:"role"`
	Serial    string     `json:"serial"`
	Issued    *time.Time `json:"issued"`
	Expires   *time.Time `json:"expires"`
	Revoked   bool       `json:"revoked"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	IssuedBy  string     `json:"issued_by"`
}

func adminCertToJSON(c *pb.AdminCertificate) adminCertJSON {
	return adminCertJSON{Name: c.Name, Role: c.Role, Serial: c.Serial, Issued: timeOrNil(c.Issued), Expires: timeOrNil(c.Expires),
		Revoked: c.Revoked, RevokedAt: timeOrNil(c.RevokedAt), IssuedBy: c.IssuedBy}
}

func writeAdminCerts(w io.Writer, format outputFormat, certs []*pb.AdminCertificate) error {
	if format.structured() {
		out := make([]adminCertJSON, 0, len(certs))
		for _, c := range certs {
			out = append(out, adminCertToJSON(c))
		}
		return writeData(w, format, out)
	}
	if len(certs) == 0 {
		_, err := fmt.Fprintln(w, "No certificates issued by the cluster yet (the one agent init wrote is not listed).")
		return err
	}
	when := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	}
	rows := [][]string{{"NAME", "ROLE", "SERIAL", "EXPIRES", "REVOKED"}}
	for _, c := range certs {
		j := adminCertToJSON(c)
		revoked := "no"
		if j.Revoked {
			revoked = "revoked " + when(j.RevokedAt)
		}
		name, role := j.Name, j.Role
		if name == "" {
			name, role = "-", "-"
		}
		rows = append(rows, []string{name, role, j.Serial, when(j.Expires), revoked})
	}
	return writeTable(w, rows)
}

func newClusterCertsCommand(g *globalFlags) *cobra.Command {
	var format outputFormat
	c := &cobra.Command{
		Use:   "certs",
		Short: "List the operator certificates the cluster issued",
		Long: `List the operator certificates cluster admin-cert issued: name, role, serial,
expiry, and whether they were revoked. Needs the admin role.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return showAnswer(g, cmd, "list certificates", (*client.Client).AdminCerts, func(_ context.Context, _ *client.Client, out io.Writer, certs []*pb.AdminCertificate) error {
				return writeAdminCerts(out, format, certs)
			})
		},
	}
	addOutputFlag(c, &format)
	return c
}

func newClusterRevokeCertCommand(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke-cert SERIAL|NAME",
		Short: "Revoke an operator certificate: every manager refuses it from now on",
		Long: `Revoke the operator certificate of SERIAL (as cluster certs prints it, or as
openssl prints one), or every certificate issued for NAME. Every manager
refuses a revoked certificate at its next call, and ends the calls and
watches it has open within a second. A serial the cluster did not
issue (the certificate agent init wrote) is revoked too. The certificate
this command runs with is refused: revoke it with another. Needs the admin
role.`,
		Example: `  curator cluster revoke-cert alice
  curator cluster revoke-cert 3f2a9c...`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withChangeClient(cmd, func(ctx context.Context, c *client.Client) error {
				revoked, err := c.RevokeAdminCert(ctx, args[0])
				if err != nil {
					return apiError("revoke certificate", err)
				}
				for _, r := range revoked {
					name := r.Name
					if name == "" {
						name = "(not issued by the cluster)"
					}
					if _, err := fmt.Fprintf(cmd.OutOrStdout(), "revoked %s %s\n", r.Serial, name); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
}
