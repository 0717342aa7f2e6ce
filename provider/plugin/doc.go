// Package plugin runs providers as plugins: executables the leader starts
// and speaks gRPC to, over the ProviderPlugin service of
// proto/provider_plugin.proto, with HashiCorp's go-plugin (the handshake,
// the process, mTLS on its socket). A group names one with
// `provider: {plugin: {path: ..., config: {...}}}` (docs/providers.md).
//
// Two halves:
//
//   - New (host.go) is the leader's side: a provider.Provider (and
//     provider.LastWords) whose calls go to the plugin process, started on
//     the first call and configured with the spec's config. A plugin that
//     exits, or does not answer a call within Config.Timeout, is killed
//     and started again on a later call, after a backoff (1 s, 2 s, ...
//     up to a minute); until then each call fails at once, saying why.
//   - Serve (serve.go) is the plugin's side: a Go author writes a
//     provider.Provider and a main that hands its constructor to Serve
//     (cmd/curator-provider-exec does, for the exec provider).
//
// A plugin holds no state the leader relies on: a new leader starts its
// own plugin process and finds the machines with List, by their labels,
// as it does with the built-in providers. So a plugin's machines must be
// found by List from whatever the plugin keeps outside its process (a
// cloud's tags, files, a daemon), however its process ended.
package plugin

import goplugin "github.com/hashicorp/go-plugin"

// Handshake is what the leader and a plugin check of each other before
// anything else: the cookie says the executable was started as a curator
// provider plugin (run by hand, it says so and exits), and the protocol
// version is the ProviderPlugin service's. A change of the service that an
// older plugin could not serve is a new ProtocolVersion.
var Handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "CURATOR_PROVIDER_PLUGIN",
	MagicCookieValue: "a0c1f9e3-provider-plugin",
}

// pluginName is the one plugin a provider plugin serves.
const pluginName = "provider"
