package spec

import (
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/provider/process"
)

// A group's failure domains (`domains:`) are names its provider knows: the
// docker provider's engines (provider.docker.engines), the process
// provider's address ranges (provider.process.domains), a plugin's zones.
// The group spreads its machines across them; the names are shown in
// `node ls` and `group ls`, and make part of a docker machine's container
// name and node name, so they are short.

// The limits of a group's failure domains.
const (
	// MaxDomains is how many domains a group, or engines a docker
	// provider, may name.
	MaxDomains = 16
	// MaxDomainLength is the longest domain name: it goes into the
	// container's and the node's names.
	MaxDomainLength = 20
)

// domainName: letters, digits, '-', '.', '_', starting and ending with a
// letter or digit, as a node name, shorter.
var domainName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,18}[A-Za-z0-9])?$`)

// ValidateDomainName checks a failure domain's name.
func ValidateDomainName(name string) error {
	if !domainName.MatchString(name) {
		return fmt.Errorf("domain %s: use 1 to %d letters, digits, '-', '.' or '_', starting and ending with a letter or digit", QuoteShort(name), MaxDomainLength)
	}
	return nil
}

// dockerEngineFields are the fields of one engine of provider.docker.engines.
var dockerEngineFields = []string{"host", "subnet"}

// dockerEngines reads provider.docker.engines: a mapping of domain names
// to engines, each {host: ..., subnet: ...}, or the host alone.
func dockerEngines(n *yaml.Node, name string) (map[string]*pb.DockerEngine, error) {
	if n.Kind != yaml.MappingNode {
		return nil, specError(n, name, "want a mapping of domain names to engines, such as {a: {host: unix:///run/a.sock, subnet: 172.31.1.0/24}}")
	}
	out := map[string]*pb.DockerEngine{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if err := ValidateDomainName(k.Value); err != nil {
			return nil, specError(k, name, "%v", err)
		}
		if _, dup := out[k.Value]; dup {
			return nil, specError(k, name, "%s is given twice", QuoteShort(k.Value))
		}
		what := name + "." + k.Value
		e := &pb.DockerEngine{}
		if v.Kind == yaml.ScalarNode {
			e.Host = v.Value
		} else {
			fs, err := mapping(v, what, dockerEngineFields)
			if err != nil {
				return nil, err
			}
			for _, f := range fs {
				switch f.key {
				case "host":
					e.Host, err = scalar(f.value, what+".host")
				case "subnet":
					e.Subnet, err = scalar(f.value, what+".subnet")
				}
				if err != nil {
					return nil, err
				}
			}
		}
		if err := validateEngineHost(e.Host); err != nil {
			return nil, specError(v, what+".host", "%v", err)
		}
		out[k.Value] = e
	}
	return out, nil
}

// validateEngineHost checks a Docker engine's address: unix:///abs/path or
// tcp://host:port.
func validateEngineHost(host string) error {
	u, err := url.Parse(host)
	if err != nil {
		return fmt.Errorf("want unix:///path/docker.sock or tcp://host:port, got %s", QuoteShort(host))
	}
	switch u.Scheme {
	case "unix":
		if u.Host != "" || !path.IsAbs(u.Path) {
			return fmt.Errorf("want unix:///absolute/path, got %s", QuoteShort(host))
		}
	case "tcp":
		if u.Hostname() == "" || u.Port() == "" || (u.Path != "" && u.Path != "/") {
			return fmt.Errorf("want tcp://host:port, got %s", QuoteShort(host))
		}
	default:
		return fmt.Errorf("want unix:///path/docker.sock or tcp://host:port, got %s", QuoteShort(host))
	}
	return nil
}

// DefaultGroupDomainHold is how long a group holds a dark domain's
// machines at most, when it names domains.
const DefaultGroupDomainHold = 15 * time.Minute

// normalizeDomains gives a group on docker engines, or on a process
// provider's ranges, the domains of every engine or range when it names
// none, and a group with domains its domain_hold.
func normalizeDomains(s *pb.GroupSpec) {
	if d := s.GetProvider().GetDocker(); d != nil && len(s.Domains) == 0 && len(d.Engines) > 0 {
		s.Domains = slices.Sorted(maps.Keys(d.Engines))
	}
	if p := s.GetProvider().GetProcess(); p != nil && len(s.Domains) == 0 && len(p.Domains) > 0 {
		s.Domains = slices.Sorted(maps.Keys(p.Domains))
	}
	if len(s.Domains) > 0 && s.DomainHold == nil {
		s.DomainHold = durationpb.New(DefaultGroupDomainHold)
	}
}

// validateDomains checks a group's domains, and its provider's engines,
// against each other.
func validateDomains(s *pb.GroupSpec) []error {
	var errs []error
	if d := s.GetDomainHold(); d != nil && d.AsDuration() <= 0 {
		errs = append(errs, fmt.Errorf("domain_hold: want a positive duration, got %v", d.AsDuration()))
	}
	if len(s.Domains) > MaxDomains {
		errs = append(errs, fmt.Errorf("domains: %d are more than %d", len(s.Domains), MaxDomains))
	}
	for i, d := range s.Domains {
		if err := ValidateDomainName(d); err != nil {
			errs = append(errs, fmt.Errorf("domains: %w", err))
		}
		if slices.Contains(s.Domains[:i], d) {
			errs = append(errs, fmt.Errorf("domains: %s is given twice", QuoteShort(d)))
		}
	}
	switch p := s.GetProvider().GetKind().(type) {
	case *pb.ProviderSpec_Process:
		errs = append(errs, validateProcessDomains(p.Process)...)
		errs = append(errs, domainsOf(s.Domains, slices.Collect(maps.Keys(p.Process.Domains)), "provider.process.domains",
			"the process provider has one range of addresses, no domains: give a range per domain in provider.process.domains to spread the group across them")...)
	case *pb.ProviderSpec_Docker:
		errs = append(errs, validateEngines(p.Docker)...)
		errs = append(errs, domainsOf(s.Domains, slices.Collect(maps.Keys(p.Docker.Engines)), "provider.docker.engines",
			"the docker provider has one engine, the leader's own: name its engines in provider.docker.engines to spread the group across them")...)
	}
	return errs
}

// validateEngines checks a docker provider's engines: valid names and
// hosts, each engine once, and with more than one, a subnet of its own
// for each (the engines' hosts route between them).
func validateEngines(d *pb.DockerProviderSpec) []error {
	var errs []error
	if len(d.Engines) > MaxDomains {
		errs = append(errs, fmt.Errorf("provider.docker.engines: %d are more than %d", len(d.Engines), MaxDomains))
	}
	hosts := map[string]string{}
	subnets := map[string]netip.Prefix{}
	for _, name := range slices.Sorted(maps.Keys(d.Engines)) {
		e := d.Engines[name]
		what := "provider.docker.engines." + name
		if err := ValidateDomainName(name); err != nil {
			errs = append(errs, fmt.Errorf("provider.docker.engines: %w", err))
		}
		if len(e.GetHost()) > MaxProviderValue || len(e.GetSubnet()) > MaxProviderValue {
			errs = append(errs, fmt.Errorf("%s: a value longer than %d bytes (MaxProviderValue)", what, MaxProviderValue))
			continue
		}
		if err := validateEngineHost(e.GetHost()); err != nil {
			errs = append(errs, fmt.Errorf("%s.host: %w", what, err))
		} else if other, dup := hosts[e.Host]; dup {
			errs = append(errs, fmt.Errorf("%s.host: %s is engine %s's too: each engine is a domain of its own", what, QuoteShort(e.Host), other))
		}
		hosts[e.GetHost()] = name
		if e.GetSubnet() == "" {
			if len(d.Engines) > 1 {
				errs = append(errs, fmt.Errorf("%s.subnet: with several engines, each needs a subnet of its own, such as 172.31.1.0/24", what))
			}
			continue
		}
		pre, err := netip.ParsePrefix(e.Subnet)
		if err != nil || !pre.Addr().Is4() || pre != pre.Masked() {
			errs = append(errs, fmt.Errorf("%s.subnet: want an IPv4 subnet such as 172.31.1.0/24, got %s", what, QuoteShort(e.Subnet)))
			continue
		}
		for other, op := range subnets {
			if op.Overlaps(pre) {
				errs = append(errs, fmt.Errorf("%s.subnet: %s overlaps engine %s's %s", what, pre, other, op))
			}
		}
		subnets[name] = pre
	}
	return errs
}

// processDomains reads provider.process.domains: a mapping of domain
// names to address ranges, FIRST-LAST each, as provider.process.addresses.
func processDomains(n *yaml.Node, name string) (map[string]string, error) {
	if n.Kind != yaml.MappingNode {
		return nil, specError(n, name, "want a mapping of domain names to address ranges, such as {a: 127.0.181.10-127.0.181.19, b: 127.0.182.10-127.0.182.19}")
	}
	return stringMap(n, name, func(k, v string) error {
		if err := ValidateDomainName(k); err != nil {
			return err
		}
		if _, err := process.AddressRange(v, 1); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		return nil
	})
}

// validateProcessDomains checks a process provider's domains: valid
// names, each a valid range of its own, no address in two (a machine is
// in the domain whose range holds its address).
func validateProcessDomains(p *pb.ProcessProviderSpec) []error {
	var errs []error
	if len(p.Domains) > MaxDomains {
		// Not checked one by one: the overlaps take the square.
		return []error{fmt.Errorf("provider.process.domains: %d are more than %d", len(p.Domains), MaxDomains)}
	}
	type span struct{ first, last netip.Addr }
	spans := map[string]span{}
	for _, name := range slices.Sorted(maps.Keys(p.Domains)) {
		r := p.Domains[name]
		if err := ValidateDomainName(name); err != nil {
			errs = append(errs, fmt.Errorf("provider.process.domains: %w", err))
			continue
		}
		what := "provider.process.domains." + name
		first, last, err := process.RangeBounds(r)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
			continue
		}
		for _, other := range slices.Sorted(maps.Keys(spans)) {
			if o := spans[other]; !last.Less(o.first) && !o.last.Less(first) {
				errs = append(errs, fmt.Errorf("%s: %s overlaps domain %s's %s: a machine is in the domain whose range holds its address, so no address may be in two", what, r, other, p.Domains[other]))
			}
		}
		spans[name] = span{first, last}
	}
	return errs
}

// domainsOf refuses each of a group's domains that is not one of its
// provider's (known, from the provider's field); none says why when the
// provider has none.
func domainsOf(domains, known []string, field, none string) []error {
	var errs []error
	for _, d := range domains {
		if slices.Contains(known, d) {
			continue
		}
		if len(known) == 0 {
			return append(errs, fmt.Errorf("domains: %s: %s", QuoteShort(d), none))
		}
		errs = append(errs, fmt.Errorf("domains: %s is not one of %s (%s)", QuoteShort(d), field, strings.Join(slices.Sorted(slices.Values(known)), ", ")))
	}
	return errs
}
