// Package process is the provider.Provider that runs nodes as local
// processes: each instance is one `curator agent ...` process on this host,
// with an address of its own from a pool (distinct loopback addresses let
// several nodes share the host; docs/architecture.md) and a data dir of
// its own. The pool may be split into failure domains, a range of
// addresses each (Config.Domains, domains.go).
//
// The bookkeeping is on disk, not in memory, so that any leader on the host
// (a new one after a failover, or one in another process) finds the same
// instances:
//
//	DIR/lock                         flock(2) serialising Provision and Prune
//	DIR/instances/<id>/instance.json the record: id, labels, address, pid, ...
//	DIR/instances/<id>/data/         the node's data dir ({{data-dir}})
//	DIR/instances/<id>/agent.log     the node's stdout and stderr
//
// The record is the truth; the process is judged alive by its pid, checked
// against the start time recorded with it so that a recycled pid is not
// mistaken for the node (on Linux; elsewhere a signal 0 is all there is).
// Processes run in a session of their own, so they outlive the leader that
// started them, and the provider starts no goroutine to wait for them: a
// process this one started is reaped when the provider next looks at it
// (List, Destroy, Prune); until then an exited child stays a zombie, which
// counts as dead.
//
// Beyond provider.Provider, Stop stops an instance and keeps it (its dir,
// its data and its address), ListStopped finds the stopped and dead ones,
// and Start runs one again with new args: `curator dev` stops its nodes
// when it ends and starts them again with `agent run` the next time. With
// Config.StopWithParent the instances get SIGTERM when their starter dies
// (Linux).
//
// Nothing a restart could bring back is deleted unasked. An instance whose
// process died without Stop (a kill, a crash, a power loss or a reboot of
// the host) keeps its dir and its address like a stopped one: ListDead
// lists it, Start runs it again, and only ClearDead or Destroy removes it,
// which the group loop calls once the instance's node is gone from the
// cluster (curator/loop_groups.go).
//
// Provision is not idempotent with respect to its spec. The machines of one
// group have identical specs, so a spec names no machine to find again; the
// caller, a level-triggered loop, counts the machines with List before it
// provisions. What a crash in the middle of Provision can leave behind is a
// record with no process (pid 0, or a dir with no record at all), which List
// ignores and Prune removes (Prune removes nothing else), or, when the crash came between starting the
// process and recording its pid, a running node whose record says pid 0:
// List and Prune find that process by its data dir (on Linux) and record
// it (adopt.go).
//
// Two leaders on one host cannot hand out one address twice: Provision and
// Prune hold an flock on DIR/lock. Provision also skips an address on
// whose node ports (PORT to PORT+3) another process listens, so that
// something else on the host, or a killed node not quite gone, does not
// make the new node exit at once; still, the pool should not hold
// addresses that something else on the host uses.
//
// The package builds on Linux and the BSDs (macOS included): it needs
// sessions, flock(2) and signals.
package process
