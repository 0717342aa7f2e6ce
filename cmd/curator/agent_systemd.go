package main

// Running the agent under systemd (deploy/systemd/curator-agent.service):
// readiness over the notify socket, exit statuses a unit can tell apart,
// and logs without a time of their own when journald stamps them.

import (
	"context"
	"os"

	"github.com/coreos/go-systemd/v22/daemon"
	"go.uber.org/zap"

	"github.com/curatorproject/curator/node"
)

// The exit statuses of an agent (agent run, init, join, restore):
//
//	0            stopped (SIGTERM, Ctrl-C) or left the cluster (agent leave)
//	1            an error: a restart may help (Restart=on-failure)
//	exitRefused  the cluster refuses the node (removed, decommissioned, or
//	             refused after a recovery): a restart cannot help
//	             (RestartPreventExitStatus)
const exitRefused = 3

// notifyReady tells systemd (Type=notify) the agent is ready once its node
// is in the cluster with a session up. Without NOTIFY_SOCKET it does
// nothing.
func notifyReady(ctx context.Context, lg *zap.Logger, a *node.Agent) {
	if os.Getenv("NOTIFY_SOCKET") == "" {
		return
	}
	if err := a.WaitJoined(ctx); err != nil {
		return
	}
	notifySystemd(lg, daemon.SdNotifyReady+"\nSTATUS=joined, node "+a.NodeID())
}

// notifySystemd sends state to the notify socket, if there is one.
func notifySystemd(lg *zap.Logger, state string) {
	if os.Getenv("NOTIFY_SOCKET") == "" {
		return
	}
	if _, err := daemon.SdNotify(false, state); err != nil {
		lg.Warn("could not notify systemd", zap.String("state", state), zap.Error(err))
		return
	}
	lg.Debug("notified systemd", zap.String("state", state))
}
