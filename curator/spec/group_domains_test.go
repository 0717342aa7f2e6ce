package spec

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	pb "github.com/curatorproject/curator/proto"
)

const enginesFile = `name: w
size: 3
roles: [worker]
provider:
  docker:
    network: curator
    subnet: 172.28.0.0/24
    engines:
      a: {host: unix:///run/a/docker.sock, subnet: 172.31.1.0/24}
      b: {host: "tcp://10.0.0.2:2375", subnet: 172.31.2.0/24}
      c:
        host: unix:///run/c/docker.sock
        subnet: 172.31.3.0/24
`

func TestGroupDomains(t *testing.T) {
	s, err := ParseGroupSpec([]byte(enginesFile))
	if err != nil {
		t.Fatal(err)
	}
	// No domains given: every engine's.
	if d := cmp.Diff([]string{"a", "b", "c"}, s.Domains); d != "" {
		t.Errorf("domains (-want +got):\n%s", d)
	}
	if s.DomainHold.AsDuration() != DefaultGroupDomainHold {
		t.Errorf("domain_hold %v, want the default %v", s.DomainHold.AsDuration(), DefaultGroupDomainHold)
	}
	out, err := MarshalGroupSpec(s)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseGroupSpec(out)
	if err != nil {
		t.Fatalf("%v in:\n%s", err, out)
	}
	if d := cmp.Diff(s, again, protocmp.Transform()); d != "" {
		t.Errorf("describe | commit changed the spec (-first +again):\n%s\n%s", d, out)
	}
	some, err := ParseGroupSpec([]byte(strings.Replace(enginesFile, "size: 3\n", "size: 3\ndomains: [c, a]\ndomain_hold: 1h\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"c", "a"}, some.Domains); d != "" || some.DomainHold.AsDuration() != time.Hour {
		t.Errorf("domains given (-want +got):\n%s; domain_hold %v, want 1h", d, some.DomainHold.AsDuration())
	}
}

const processDomainsFile = `name: w
size: 3
roles: [consensus]
provider:
  process:
      domains:
        a: 127.0.181.10-127.0.181.19
        b: 127.0.182.10-127.0.182.19
        c: 127.0.183.10-127.0.183.19
      dir: /var/lib/curator/w
`

// TestGroupProcessDomains: a process provider's ranges by domain are the
// group's domains when it names none, and print back as they were read.
func TestGroupProcessDomains(t *testing.T) {
	s, err := ParseGroupSpec([]byte(processDomainsFile))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"a", "b", "c"}, s.Domains); d != "" {
		t.Errorf("domains (-want +got):\n%s", d)
	}
	want := map[string]string{"a": "127.0.181.10-127.0.181.19", "b": "127.0.182.10-127.0.182.19", "c": "127.0.183.10-127.0.183.19"}
	if d := cmp.Diff(want, s.GetProvider().GetProcess().GetDomains()); d != "" || s.GetProvider().GetProcess().GetAddresses() != "" {
		t.Errorf("provider.process.domains (-want +got):\n%s; addresses %q, want none", d, s.GetProvider().GetProcess().GetAddresses())
	}
	out, err := MarshalGroupSpec(s)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "addresses:") {
		t.Errorf("the spec of ranges by domain prints an addresses field:\n%s", out)
	}
	again, err := ParseGroupSpec(out)
	if err != nil {
		t.Fatalf("%v in:\n%s", err, out)
	}
	if d := cmp.Diff(s, again, protocmp.Transform()); d != "" {
		t.Errorf("describe | commit changed the spec (-first +again):\n%s\n%s", d, out)
	}
	some, err := ParseGroupSpec([]byte(strings.Replace(processDomainsFile, "size: 3\n", "size: 3\ndomains: [c, a]\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"c", "a"}, some.Domains); d != "" {
		t.Errorf("domains given (-want +got):\n%s", d)
	}
}

// TestValidateProcessDomains: what the server checks of a process
// provider's domains, whatever client sent the spec.
func TestValidateProcessDomains(t *testing.T) {
	for _, tc := range []struct {
		name    string
		domains map[string]string
		want    string
	}{
		{"apart", map[string]string{"a": "127.0.181.1-127.0.181.9", "b": "127.0.181.10-127.0.181.19"}, ""},
		{"sharing one address", map[string]string{"a": "127.0.181.1-127.0.181.10", "b": "127.0.181.10-127.0.181.19"}, "provider.process.domains.b: 127.0.181.10-127.0.181.19 overlaps domain a's 127.0.181.1-127.0.181.10"},
		{"bad name", map[string]string{"a b": "127.0.181.1-127.0.181.9"}, `provider.process.domains: domain "a b": use 1 to 20`},
		{"bad range", map[string]string{"a": "127.0.181.9-127.0.181.1"}, "provider.process.domains.a: first address 127.0.181.9 comes after last address 127.0.181.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := validateProcessDomains(&pb.ProcessProviderSpec{Domains: tc.domains})
			got := errors.Join(errs...)
			switch {
			case tc.want == "" && got != nil:
				t.Errorf("%v, want none", got)
			case tc.want != "" && (got == nil || !strings.Contains(got.Error(), tc.want)):
				t.Errorf("%v, want an error with %q", got, tc.want)
			}
		})
	}
	many := map[string]string{}
	for i := range MaxDomains + 1 {
		many[fmt.Sprintf("d%d", i)] = fmt.Sprintf("127.0.%d.1-127.0.%d.2", 100+i, 100+i)
	}
	if err := errors.Join(validateProcessDomains(&pb.ProcessProviderSpec{Domains: many})...); err == nil || !strings.Contains(err.Error(), "17 are more than 16") {
		t.Errorf("%d domains: %v, want more than %d refused", len(many), err, MaxDomains)
	}
}

func TestGroupDomainsErrors(t *testing.T) {
	withDomains := func(d string) string {
		return strings.Replace(enginesFile, "size: 3\n", "size: 3\ndomains: "+d+"\n", 1)
	}
	engine := func(old, new string) string { return strings.Replace(enginesFile, old, new, 1) }
	for _, tc := range []struct{ name, file, want string }{
		{"unknown domain", withDomains("[a, z]"), `domains: "z" is not one of provider.docker.engines (a, b, c)`},
		{"domain twice", withDomains("[a, a]"), `domains: "a" is given twice`},
		{"bad domain name", withDomains("[a, -b]"), `domain "-b": use 1 to 20`},
		{"long domain name", withDomains("[abcdefghijklmnopqrstuvwxyz]"), `use 1 to 20`},
		{"domain without engines", "name: w\nroles: [worker]\ndomains: [a]\nprovider: {docker: {network: n, subnet: 172.28.0.0/24}}\n",
			`the docker provider has one engine, the leader's own: name its engines in provider.docker.engines`},
		{"process domains without ranges", "name: w\nroles: [worker]\ndomains: [a]\nprovider: {process: {addresses: 127.0.0.1-127.0.0.2, dir: /x}}\n",
			`domains: "a": the process provider has one range of addresses, no domains: give a range per domain in provider.process.domains`},
		{"unknown process domain", strings.Replace(processDomainsFile, "size: 3\n", "size: 3\ndomains: [a, z]\n", 1),
			`domains: "z" is not one of provider.process.domains (a, b, c)`},
		{"overlapping ranges", strings.Replace(processDomainsFile, "127.0.182.10-127.0.182.19", "127.0.181.19-127.0.182.19", 1),
			`provider.process.domains.b: 127.0.181.19-127.0.182.19 overlaps domain a's 127.0.181.10-127.0.181.19`},
		{"range inside another", strings.Replace(processDomainsFile, "127.0.183.10-127.0.183.19", "127.0.181.12-127.0.181.12", 1),
			`provider.process.domains.c: 127.0.181.12-127.0.181.12 overlaps domain a's`},
		{"bad process domain name", strings.Replace(processDomainsFile, "    b:", "    -b:", 1),
			`provider.process.domains: domain "-b": use 1 to 20`},
		{"bad range", strings.Replace(processDomainsFile, "127.0.182.10-127.0.182.19", "127.0.182.10", 1),
			`provider.process.domains: b: want FIRST-LAST`},
		{"process domains twice", strings.Replace(processDomainsFile, "    c:", "    a:", 1),
			`provider.process.domains: "a" is given twice`},
		{"addresses and domains", strings.Replace(processDomainsFile, "      domains:", "      addresses: 127.0.184.1-127.0.184.2\n      domains:", 1),
			`provider.process: give addresses (one range) or domains (a range per failure domain), not both`},
		{"process domains not a mapping", "name: w\nroles: [worker]\nprovider: {process: {domains: [a], dir: /x}}\n", "want a mapping of domain names to address ranges"},
		{"engine host", engine("tcp://10.0.0.2:2375", "http://10.0.0.2"), `provider.docker.engines.b.host: want unix:///path/docker.sock or tcp://host:port, got "http://10.0.0.2"`},
		{"relative socket", engine("unix:///run/a/docker.sock", "unix://run/a.sock"), `want unix:///absolute/path`},
		{"tcp without port", engine("tcp://10.0.0.2:2375", "tcp://10.0.0.2"), `want tcp://host:port`},
		{"same host twice", engine("unix:///run/c/docker.sock", "unix:///run/a/docker.sock"), `provider.docker.engines.c.host: "unix:///run/a/docker.sock" is engine a's too`},
		{"no subnet", engine(", subnet: 172.31.2.0/24}", "}"), `provider.docker.engines.b.subnet: with several engines, each needs a subnet of its own`},
		{"overlapping subnets", engine("172.31.2.0/24", "172.31.0.0/16"), `provider.docker.engines.b.subnet: 172.31.0.0/16 overlaps engine a's 172.31.1.0/24`},
		{"bad subnet", engine("172.31.2.0/24", "172.31.2.1/24"), `provider.docker.engines.b.subnet: want an IPv4 subnet`},
		{"unknown engine field", engine("subnet: 172.31.2.0/24}", "subnet: 172.31.2.0/24, tls: yes}"), `unknown field "tls"`},
		{"engines not a mapping", "name: w\nroles: [worker]\nprovider: {docker: {network: n, subnet: 172.28.0.0/24, engines: [a]}}\n", "want a mapping of domain names to engines"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseGroupSpec([]byte(tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}
