package main

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/curatorproject/curator/provider"
	"github.com/curatorproject/curator/provider/docker"
	"github.com/curatorproject/curator/provider/plugin"
)

// The keys of the plugin's config (every one optional; docker.Config's
// defaults fill what is missing).
const (
	// keyHost is the one Docker engine's address (unix:///path or
	// tcp://host:port); default $DOCKER_HOST, else the local socket.
	keyHost = "host"
	// keyEngines are several engines, a failure domain each, as
	// space-separated DOMAIN=HOST or DOMAIN=HOST,SUBNET; host is then
	// unused.
	keyEngines = "engines"
	// keyNetwork, keySubnet, keyImage and keyPort are docker.Config's
	// Network, Subnet (the engines' default), Image and Port.
	keyNetwork = "network"
	keySubnet  = "subnet"
	keyImage   = "image"
	keyPort    = "port"
	// keyListTimeout bounds how long List waits for one engine of
	// several (a Go duration).
	keyListTimeout = "list-timeout"
)

// known are the keys the plugin reads, and the one the leader reads
// itself (plugin.ConfigTimeout).
var known = []string{keyHost, keyEngines, keyNetwork, keySubnet, keyImage, keyPort, keyListTimeout, plugin.ConfigTimeout}

// parseConfig is the docker.Config of a group's plugin config, or what
// is wrong with it, key by key.
func parseConfig(config map[string]string) (docker.Config, error) {
	cfg := docker.Config{
		Host: config[keyHost], Network: config[keyNetwork], Subnet: config[keySubnet], Image: config[keyImage],
	}
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(config)) {
		if !slices.Contains(known, k) {
			errs = append(errs, fmt.Errorf("%s: not a key of the docker plugin (it reads %s)", k, strings.Join(known, ", ")))
		}
	}
	if s, ok := config[keyPort]; ok {
		port, err := strconv.Atoi(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: want a number, got %q", keyPort, s))
		}
		cfg.Port = port
	}
	if s, ok := config[keyListTimeout]; ok {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("%s: want a positive duration such as 5s, got %q", keyListTimeout, s))
		}
		cfg.ListTimeout = d
	}
	if s, ok := config[keyEngines]; ok {
		engines, err := parseEngines(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", keyEngines, err))
		}
		if _, host := config[keyHost]; host {
			errs = append(errs, fmt.Errorf("%s and %s: name one engine or several, not both", keyHost, keyEngines))
		}
		cfg.Engines = engines
	}
	return cfg, errors.Join(errs...)
}

// parseEngines reads "DOMAIN=HOST[,SUBNET] ...".
func parseEngines(s string) (map[string]docker.Engine, error) {
	out := map[string]docker.Engine{}
	for _, f := range strings.Fields(s) {
		domain, rest, ok := strings.Cut(f, "=")
		host, subnet, _ := strings.Cut(rest, ",")
		if !ok || domain == "" || host == "" {
			return nil, fmt.Errorf("%q: want DOMAIN=HOST or DOMAIN=HOST,SUBNET", f)
		}
		if _, dup := out[domain]; dup {
			return nil, fmt.Errorf("domain %s named twice", domain)
		}
		out[domain] = docker.Engine{Host: host, Subnet: subnet}
	}
	if len(out) == 0 {
		return nil, errors.New("empty: name at least one DOMAIN=HOST")
	}
	return out, nil
}

// newProvider is the docker provider of a group's plugin config: one
// engine, or several with engines.
func newProvider(config map[string]string) (provider.Provider, error) {
	cfg, err := parseConfig(config)
	if err != nil {
		return nil, err
	}
	return docker.Open(cfg)
}
