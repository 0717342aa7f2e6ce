package spec

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
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
		{"process domains", "name: w\nroles: [worker]\ndomains: [a]\nprovider: {process: {addresses: 127.0.0.1-127.0.0.2, dir: /x}}\n",
			"the process provider makes every machine on the leader's host"},
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
