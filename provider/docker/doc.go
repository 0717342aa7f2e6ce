// Package docker is the provider.Provider that runs nodes as containers:
// each instance is one container of the curator image (FROM scratch: the
// static binary, an empty /tmp and any plugin the build adds; see
// Dockerfile and BuildImage) on a user-defined bridge network, with a
// fixed address of its own from the network's subnet and the same port as
// every other (docs/architecture.md, "Providers").
//
// The bookkeeping is the daemon's, not the provider's, so that any leader
// (a new one after a failover, or one on another machine using the same
// daemon) finds the same instances:
//
//	container name   NETWORK-<8 hex digits>: the instance ID
//	container labels the spec's labels, and the provider's own under
//	                 "curator.docker.": the network (its scope), the
//	                 address, the keys of the spec's labels
//	container state  running or paused (a frozen machine): listed;
//	                 created or exited: not listed, removed by Prune
//	data dir         Config.DataDir in the container: a volume of the
//	                 container, or Config.HostDir/<id> bind-mounted
//
// Provision is not idempotent with respect to its spec, as with the process
// provider: the caller counts the machines of a group with List first. Two
// leaders never hand out one address twice: Docker refuses to start a
// container whose fixed address a running one holds, and the loser moves on
// to the next address (see Provision).
//
// The client negotiates the API version with the daemon (1.40 and later).
package docker
