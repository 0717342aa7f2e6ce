// Package scripts is the provider of the exec plugin
// (cmd/curator-provider-exec): it makes, lists and destroys machines by
// running an operator's own scripts, one per verb, so that a cloud's CLI
// or an SSH to a bare-metal host becomes a provider without Go. The
// contract the scripts meet (arguments, environment, what they print,
// their exit codes) is docs/providers.md's "The exec plugin"; this file
// is its summary:
//
//	provision  argv: the agent's arguments ({{instance-id}} replaced;
//	           {{address}} and {{data-dir}} are the script's to replace)
//	           env:  CURATOR_INSTANCE_ID, CURATOR_LABELS (JSON object),
//	                 CURATOR_DOMAIN, CURATOR_MANAGER (true/false),
//	                 CURATOR_AGENT_ENV (the names of the agent's variables,
//	                 which are set too: the join token among them)
//	           out:  nothing, or one machine line
//	destroy    argv: the machine's ID; env: CURATOR_INSTANCE_ID
//	           exit 0 once the machine is gone, also when it was already
//	list       env:  CURATOR_SELECTOR (JSON object)
//	           out:  one machine line for each machine it has made
//	last-words argv: the machine's ID; env: CURATOR_INSTANCE_ID (optional)
//	           out:  the machine's agent's output, or nothing
//
// A machine line is a JSON object: {"id": ..., "labels": {...},
// "address": "IP:PORT", "domain": ..., "created": RFC 3339}. Every script
// also gets the plugin's config as CURATOR_CONFIG_<KEY> (KEY upper-cased,
// "-" as "_"). A script that exits with another status than 0 fails the
// call, with its last line on stderr as the reason.
//
// The rule that makes it safe after a crash is the provision script's: it
// records the machine, with its ID and labels, where list reads it,
// before it starts the machine. A leader that dies in the middle of a
// provision then leaves either nothing or a machine list shows, which
// the group loop counts (and destroys, if it never joins).
package scripts
