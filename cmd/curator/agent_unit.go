package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/spf13/cobra"
)

// Defaults of `curator agent install-unit`: the unit in the repository
// (deploy/systemd/curator-agent.service) is written with them.
const (
	defaultUnitPath    = "/etc/systemd/system/curator-agent.service"
	defaultUnitBinary  = "/usr/local/bin/curator"
	defaultUnitDataDir = "/var/lib/curator"
)

// agentUnit is the systemd unit of an agent. Type=notify: the agent sends
// READY=1 once its node is in the cluster with a session up (notifyReady).
// A refused node exits with exitRefused, which no restart can mend.
var agentUnit = template.Must(template.New("unit").Parse(`# The curator node agent (written by: curator agent install-unit).
# The data dir must hold a node already: make it once with
# 'curator agent init' or 'curator agent join' (see
# docs/systemd.md in curator's repository).
[Unit]
Description=curator node agent
Documentation=https://github.com/curatorproject/curator#running-under-systemd
Wants=network-online.target
After=network-online.target

[Service]
Type=notify
NotifyAccess=main
ExecStart={{.Binary}} agent run --data-dir {{.DataDir}}{{range .Args}} {{.}}{{end}}
# 0: stopped or left the cluster (curator agent leave); 1: an error a restart
# may mend; {{.Refused}}: the cluster refuses the node (removed): restarting cannot help.
Restart=on-failure
RestartSec=5s
RestartPreventExitStatus={{.Refused}}
# Joining waits for a manager to answer; a leader resigns before it stops.
TimeoutStartSec=10min
TimeoutStopSec=60s
LimitNOFILE=65536

[Install]
WantedBy=multi-user.target
`))

// unitConfig is what a unit is written from.
type unitConfig struct {
	Binary, DataDir string
	Args            []string
	Refused         int
}

func renderUnit(c unitConfig) (string, error) {
	for _, s := range append([]string{c.Binary, c.DataDir}, c.Args...) {
		if s == "" || strings.ContainsAny(s, " \t\n\"'\\$%;") {
			return "", fmt.Errorf("%q: a unit's command line takes no spaces, quotes, '$', '%%', ';' or backslashes here", s)
		}
	}
	if !filepath.IsAbs(c.Binary) || !filepath.IsAbs(c.DataDir) {
		return "", fmt.Errorf("--binary %s and --data-dir %s: want absolute paths (systemd runs the unit from /)", c.Binary, c.DataDir)
	}
	c.Refused = exitRefused
	var b bytes.Buffer
	if err := agentUnit.Execute(&b, c); err != nil {
		return "", err
	}
	return b.String(), nil
}

func newAgentInstallUnitCommand() *cobra.Command {
	var c unitConfig
	var output string
	cmd := &cobra.Command{
		Use:   "install-unit [--data-dir DIR] [--binary PATH] [--output FILE|-] [-- AGENT FLAGS]",
		Short: "Write the systemd unit that runs this node's agent",
		Long: `Write a systemd unit (Type=notify) that runs 'curator agent run --data-dir
DIR' (and the agent flags after --, such as --docker-socket). The agent tells
systemd it is ready once its node is in the cluster with a session up; it
exits 0 when stopped or after 'curator agent leave', 1 on an error a restart
may mend (Restart=on-failure), and 3 when the cluster refuses the node
(removed): RestartPreventExitStatus=3 keeps systemd from restarting it. Logs
go to the journal without a time of their own. Then:

  systemctl daemon-reload && systemctl enable --now curator-agent`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && cmd.ArgsLenAtDash() != 0 {
				return fmt.Errorf("unknown command %q for %q: the agent's own flags go after --", args[0], cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c.Args = args
			unit, err := renderUnit(c)
			if err != nil {
				return err
			}
			if output == "-" {
				_, err := fmt.Fprint(cmd.OutOrStdout(), unit)
				return err
			}
			if err := os.WriteFile(output, []byte(unit), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Wrote %s. Start it with: systemctl daemon-reload && systemctl enable --now %s\n", output, filepath.Base(output))
			return nil
		},
	}
	cmd.Flags().StringVar(&c.DataDir, "data-dir", defaultUnitDataDir, "the node's data dir (made by agent init or join)")
	cmd.Flags().StringVar(&c.Binary, "binary", defaultUnitBinary, "the curator binary the unit runs")
	cmd.Flags().StringVar(&output, "output", defaultUnitPath, "where to write the unit; - for stdout")
	return cmd
}
