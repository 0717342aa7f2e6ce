// Command curator-provider-exec is the exec provider plugin: a leader
// starts it for a group whose spec names it
//
//	provider:
//	  plugin:
//	    path: /usr/local/bin/curator-provider-exec
//	    config: {provision: /etc/curator/provision, destroy: ..., list: ...}
//
// and it runs those scripts to make, destroy and list the group's
// machines (provider/scripts; docs/providers.md has the contract). Run
// by hand, it says it is a plugin and exits.
package main

import (
	"github.com/curatorproject/curator/provider/plugin"
	"github.com/curatorproject/curator/provider/scripts"
)

func main() { plugin.Serve(scripts.New) }
