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
// (deploy/systemd/curator-agent.service) is written with them and
// --binary /usr/local/bin/curator. Without --binary the unit runs the
// binary that writes it.
const (
	defaultUnitPath    = "/etc/systemd/system/curator-agent.service"
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

// runningBinary is the path of the binary that runs, for a unit written
// without --binary: refused when it is a temporary one (go run, go test),
// which a unit cannot run once it is gone.
func runningBinary() (string, error) {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return "", fmt.Errorf("the running binary's path: %v: pass --binary PATH", err)
	}
	// go run and go test build into a go-build* dir they remove after.
	for _, dir := range strings.Split(filepath.Dir(exe), string(filepath.Separator)) {
		if strings.HasPrefix(dir, "go-build") {
			return "", fmt.Errorf("the running binary %s is a temporary one (go run?): install curator (go install ./cmd/curator) and pass --binary PATH", exe)
		}
	}
	return exe, nil
}

// checkUnitPaths refuses a unit this machine cannot run: a binary that is
// not an executable file, a data dir that is not a directory, and, without
// force, a unit file that exists.
func checkUnitPaths(c unitConfig, output string, force bool) error {
	if fi, err := os.Stat(c.Binary); err != nil {
		return fmt.Errorf("--binary %s: %v: the unit would run a binary that is not there", c.Binary, unwrapPath(err))
	} else if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("--binary %s: not an executable file (%s)", c.Binary, fi.Mode())
	}
	if fi, err := os.Stat(c.DataDir); err != nil {
		return fmt.Errorf("--data-dir %s: %v: make the node first with 'curator agent init' or 'curator agent join' (docs/systemd.md)", c.DataDir, unwrapPath(err))
	} else if !fi.IsDir() {
		return fmt.Errorf("--data-dir %s: not a directory", c.DataDir)
	}
	if _, err := os.Lstat(output); err == nil && !force {
		return fmt.Errorf("%s exists: pass --force to write over it (or --output another file); nothing was written", output)
	}
	return nil
}

// unwrapPath is the reason of a *fs.PathError without the path, which the
// caller names already.
func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

func newAgentInstallUnitCommand() *cobra.Command {
	var c unitConfig
	var output string
	var force bool
	cmd := &cobra.Command{
		Use:   "install-unit [--data-dir DIR] [--binary PATH] [--output FILE|-] [-- AGENT FLAGS]",
		Short: "Write the systemd unit that runs this node's agent",
		Long: `Write a systemd unit (Type=notify) that runs 'curator agent run --data-dir
DIR' (and the agent flags after --, such as --docker-socket). The agent tells
systemd it is ready once its node is in the cluster with a session up; it
exits 0 when stopped or after 'curator agent leave', 1 on an error a restart
may mend (Restart=on-failure), and 3 when the cluster refuses the node
(removed): RestartPreventExitStatus=3 keeps systemd from restarting it. Logs
go to the journal without a time of their own.

The unit runs --binary, by default this very binary (its path, symlinks
resolved). Written to a file, it is refused when the binary is not an
executable file, the data dir not a directory, or the file exists already
(--force writes over it). --output - prints the unit for another machine:
its paths are not checked here. Then:

  systemctl daemon-reload && systemctl enable --now curator-agent`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && cmd.ArgsLenAtDash() != 0 {
				return fmt.Errorf("unknown command %q for %q: the agent's own flags go after --", args[0], cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c.Args = args
			if c.Binary == "" {
				exe, err := runningBinary()
				if err != nil {
					return err
				}
				c.Binary = exe
			}
			unit, err := renderUnit(c)
			if err != nil {
				return err
			}
			if output == "-" {
				_, err := fmt.Fprint(cmd.OutOrStdout(), unit)
				return err
			}
			if err := checkUnitPaths(c, output, force); err != nil {
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
	cmd.Flags().StringVar(&c.Binary, "binary", "", "the curator binary the unit runs (default this binary's path)")
	cmd.Flags().StringVar(&output, "output", defaultUnitPath, "where to write the unit; - for stdout")
	cmd.Flags().BoolVar(&force, "force", false, "write over a unit file that exists")
	return cmd
}
