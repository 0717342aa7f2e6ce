// Command curator-provider-docker is the docker provider plugin: the
// built-in docker provider (provider/docker) served as a plugin, so that
// a group names it as it names any plugin
//
//	provider:
//	  plugin:
//	    path: /usr/local/bin/curator-provider-docker
//	    config:
//	      image: curator:v1.4.0
//	      engines: "a=unix:///run/docker-a.sock,172.31.1.0/24 b=tcp://10.0.0.2:2375,172.31.2.0/24"
//
// Each engine is a failure domain of its own. The config's keys are in
// config.go and docs/providers.md. Run by hand, it says it is a plugin
// and exits.
package main

import "github.com/curatorproject/curator/provider/plugin"

func main() { plugin.Serve(newProvider) }
