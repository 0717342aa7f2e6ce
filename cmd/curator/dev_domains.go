package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/provider/process"
)

// `curator dev --domains N` splits --addresses into N failure domains
// named a, b, c, ...: consecutive ranges, one per domain, of the process
// provider (provider.process.domains). The groups spread over them, so
// that a new user sees domains placed, shown and warned of without more
// hosts or Docker.

// devDomainNames are the names --domains gives, in order.
const devDomainNames = "abcdefghijklmnop"

// validateDomains checks --domains: none, or 2 to spec.MaxDomains, each
// range with room for its share of each group.
func (c *devConfig) validateDomains() error {
	if c.domains == 0 {
		return nil
	}
	if c.domains < 2 || c.domains > spec.MaxDomains {
		return fmt.Errorf("--domains %d: want 2 to %d (or 0: none)", c.domains, spec.MaxDomains)
	}
	ranges, err := process.SplitRange(c.addresses, c.domains)
	if err != nil {
		return fmt.Errorf("--domains %d: --addresses %s: %w", c.domains, c.addresses, err)
	}
	need := ceilDiv(c.managers, c.domains) + ceilDiv(c.workers, c.domains)
	for _, r := range ranges {
		if _, err := process.AddressRange(r, need); err != nil {
			return fmt.Errorf("--domains %d: --addresses %s split %d ways gives %s, too small for its share of %d managers and %d workers: %w",
				c.domains, c.addresses, c.domains, r, c.managers, c.workers, err)
		}
	}
	return nil
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// ranges returns the ranges of the domains, by name; none without
// --domains.
func (c *devConfig) ranges() (map[string]string, error) {
	if c.domains == 0 {
		return nil, nil
	}
	if c.domains > len(devDomainNames) {
		return nil, fmt.Errorf("--domains %d: want at most %d", c.domains, len(devDomainNames))
	}
	split, err := process.SplitRange(c.addresses, c.domains)
	if err != nil {
		return nil, fmt.Errorf("--domains %d: --addresses %s: %w", c.domains, c.addresses, err)
	}
	out := map[string]string{}
	for i, r := range split {
		out[devDomainNames[i:i+1]] = r
	}
	return out, nil
}

// pools returns the process provider's pool of dev's nodes: the whole
// range, or with --domains a pool per domain.
func (c *devConfig) pools() (addresses []string, domains map[string][]string, err error) {
	ranges, err := c.ranges()
	if err != nil {
		return nil, nil, err
	}
	if len(ranges) == 0 {
		if addresses, err = process.PoolAddresses(c.addresses, devPort); err != nil {
			return nil, nil, fmt.Errorf("--addresses %q: %w", c.addresses, err)
		}
		return addresses, nil, nil
	}
	domains = map[string][]string{}
	for name, r := range ranges {
		if domains[name], err = process.PoolAddresses(r, devPort); err != nil {
			return nil, nil, fmt.Errorf("domain %s: %w", name, err)
		}
	}
	return nil, domains, nil
}

// domainsWords says what --domains makes, for dev's progress line: ""
// without it.
func (c *devConfig) domainsWords() string {
	ranges, err := c.ranges()
	if err != nil || len(ranges) == 0 {
		return ""
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(ranges)) {
		parts = append(parts, name+" "+ranges[name])
	}
	return fmt.Sprintf(" over %d failure domains (%s)", len(ranges), strings.Join(parts, ", "))
}
