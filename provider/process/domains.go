//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package process

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// Failure domains (Config.Domains): each domain is a pool of addresses,
// its own range of loopback IPs on the leader's host. The domains are no
// more apart than the processes are (one host), but a group spreads over
// them as over engines or zones, so that how it places, holds and warns
// can be seen and tried without more machines. A machine's domain is the
// one whose pool holds its address: it is not recorded, and a new leader
// with the group's spec knows it.

// Domains returns the names of Config.Domains, sorted; none for a
// provider of one pool.
func (p *Provider) Domains() []string { return slices.Clone(p.domains) }

// pool returns the addresses Provision may take for a machine of domain
// d: d's pool, or for "" (the provider's choice) every address, the
// domains' in the order of their names.
func (p *Provider) pool(d string) ([]string, error) {
	switch {
	case d == "" && len(p.domains) == 0:
		return p.cfg.Addresses, nil
	case d == "":
		var all []string
		for _, name := range p.domains {
			all = append(all, p.cfg.Domains[name]...)
		}
		return all, nil
	case len(p.domains) == 0:
		return nil, fmt.Errorf("%w %q: the provider has one pool of addresses and no domains", ErrUnknownDomain, d)
	}
	pool, ok := p.cfg.Domains[d]
	if !ok {
		return nil, fmt.Errorf("%w %q: not one of the provider's (%s)", ErrUnknownDomain, d, strings.Join(p.domains, ", "))
	}
	return pool, nil
}

// validateDomainName checks a domain's name as far as the provider needs:
// a plain, printable word. The group's spec holds names to the stricter
// rule that all domains follow (spec.ValidateDomainName).
func validateDomainName(d string) error {
	if d == "" || len(d) > maxDomainName || strings.IndexFunc(d, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }) >= 0 {
		return fmt.Errorf("%q is not a domain name: want 1 to %d printable characters, no spaces", d, maxDomainName)
	}
	return nil
}

// maxDomainName bounds a domain's name, which goes into errors and logs.
const maxDomainName = 64
