package e2e

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestNodeHumanViews: `node inspect --pretty` prints one node as keys and
// values, `node ls -o wide` adds columns, JSON stays node inspect's
// default, and a wrong combination is refused before any call.
func TestNodeHumanViews(t *testing.T) {
	parallel(t) // its own addresses and dirs
	c := newCluster(t, "127.0.148.")
	m1 := c.init("manager-1", 10)
	c.join("worker-1", 11, c.token("worker"), m1)
	c.waitReady(30*time.Second, "manager-1", "worker-1")

	out := mgmtRun(t, c, "node", "inspect", "--pretty", "worker-1")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^Name: +worker-1$`),
		regexp.MustCompile(`(?m)^Address: +127\.0\.148\.11:\d+$`),
		regexp.MustCompile(`(?m)^Status: +ready since \S+ \(\d+[smhd] ago\)$`),
		regexp.MustCompile(`(?m)^Roles: +worker$`),
		regexp.MustCompile(`(?m)^Last heartbeat: +\S+ \(\d+s ago\)$`),
		regexp.MustCompile(`(?m)^Certificate expires: +\S+ \(in \d+d\)$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("node inspect --pretty worker-1 lacks %s:\n%s", want, out)
		}
	}
	if out := mgmtRun(t, c, "node", "inspect", "worker-1"); !strings.HasPrefix(out, "{") {
		t.Errorf("node inspect worker-1 is not JSON by default:\n%s", out)
	}

	out = mgmtRun(t, c, "node", "ls", "-o", "wide")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "LAST HEARTBEAT") || !strings.Contains(lines[0], "CERT EXPIRES") {
		t.Fatalf("node ls -o wide:\n%s", out)
	}
	for _, l := range lines[1:] {
		if !regexp.MustCompile(` \d+s ago .* in \d+d `).MatchString(l) {
			t.Errorf("node ls -o wide: a row without its last heartbeat and certificate: %q", l)
		}
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"node", "inspect", "--pretty", "-o", "yaml", "worker-1"}, "--pretty prints keys and values: use it without -o"},
		{[]string{"node", "ls", "-o", "wider"}, `output format "wider" is not one of table, json, yaml, wide`},
		{[]string{"cluster", "info", "-o", "wide"}, `output format "wide" is not one of table, json, yaml`},
	} {
		if _, _, err := cli(t, append([]string{"--config", c.config}, tc.args...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("curator %s: %v, want %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}
