// Package systemd holds the agent's systemd unit as the repository ships it
// (curator-agent.service), so a test compares it with what
// `curator agent install-unit` writes wherever the test runs (go test or
// Bazel's sandbox, which holds only a package's declared files).
package systemd

import _ "embed"

// AgentUnit is deploy/systemd/curator-agent.service.
//
//go:embed curator-agent.service
var AgentUnit string
