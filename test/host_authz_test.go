package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/curatorproject/curator/internal/testenv"
)

// TestOperatorCannotReachTheHost: an operator's certificate cannot
// choose what the leader runs on its host. On a real cluster (the real
// binary), the operator commits the admin's workers group with
// /bin/bash as the binary and a BASH_ENV that writes a file (which, made
// a machine, would run as the leader's user, root here): refused, naming
// the field, the role needed and the one held; then the environment
// alone: refused too. The group is as the admin left it; the operator
// may scale it, and once its machine is ready (the group loop has run
// with the spec as it is) the file was never written. The audit trail
// says what the refused commits tried, without the environment's value.
// A NUL in a file's environment is refused by the CLI with its line.
func TestOperatorCannotReachTheHost(t *testing.T) {
	parallel(t) // its own addresses and dirs
	c := newCluster(t, "127.0.115.")
	c.init("manager-1", 10)
	dir := t.TempDir()
	t.Cleanup(func() { killInstancesUnder(dir) })
	const addresses = "127.0.115.20-127.0.115.29"
	opDir := filepath.Join(t.TempDir(), "operator")
	mgmtRun(t, c, "cluster", "admin-cert", "--role", "operator", "--name", "who-operator", "--ttl", "1h", "--out", opDir)
	opConfig := filepath.Join(opDir, "config.yaml")
	owned := filepath.Join(t.TempDir(), "owned")

	files := t.TempDir()
	commit := func(config, name, content string) (string, error) {
		t.Helper()
		file := filepath.Join(files, name+".yaml")
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		out, stderr, err := cli(t, "--config", config, "group", "commit", file)
		return out + stderr, err
	}
	group := func(size int, provider, env string) string {
		return fmt.Sprintf("name: workers\nsize: %d\nroles: [worker]\nprovider:\n  process: {addresses: %s, dir: %s%s}\n"+
			"template:\n  version: v1\n  args: [--heartbeat-interval, 200ms]\n  env: {%s}\n", size, addresses, dir, provider, env)
	}
	// The admin's group: the leader's own binary, no machine yet.
	if out, err := commit(c.config, "admin", group(0, "", "")); err != nil {
		t.Fatalf("the admin's commit: %v\n%s", err, out)
	}
	described := mgmtRun(t, c, "group", "describe", "workers")

	bashEnv := fmt.Sprintf(`BASH_ENV: "$(id > %s)"`, owned)
	for _, tc := range []struct{ name, file, field string }{
		{"bash", group(1, ", binary: /bin/bash", bashEnv), "provider.process.binary is an admin's decision"},
		{"env", group(1, "", bashEnv), "template.env.BASH_ENV is an admin's decision"},
	} {
		out, err := commit(opConfig, tc.name, tc.file)
		if err == nil {
			t.Errorf("the operator's commit with %s was taken:\n%s", tc.name, out)
			continue
		}
		for _, say := range []string{"not allowed with this certificate", tc.field, "needs the admin role", `"who-operator" holds operator`} {
			if !strings.Contains(out, say) {
				t.Errorf("the refusal of the operator's %s does not say %q:\n%s", tc.name, say, out)
			}
		}
	}
	if now := mgmtRun(t, c, "group", "describe", "workers"); now != described {
		t.Errorf("the refused commits changed the group:\n%s\nwas:\n%s", now, described)
	}

	// A NUL in the environment, escaped in the file: refused by the CLI,
	// with its line, before anything is sent.
	out, err := commit(c.config, "nul", group(0, "", `A: "x\0y"`))
	if err == nil || !strings.Contains(out, "template.env.A") || !strings.Contains(out, "control character (U+0000)") || !strings.Contains(out, "nothing was committed") {
		t.Errorf("a NUL in the environment: %v\n%s", err, out)
	}

	// The operator scales the group: its own decision. Once the machine
	// is ready, the loop has made it from the group's spec.
	mgmtRunWith(t, opConfig, "group", "scale", "workers", "1")
	testenv.Eventually(t, time.Minute, "the group's machine is ready", func() error {
		groups, err := groupLs(t, c.config)
		if err != nil {
			return err
		}
		if len(groups) != 1 || groups[0].Ready != 1 {
			return fmt.Errorf("group ls: %+v", groups)
		}
		return nil
	})
	if data, err := os.ReadFile(owned); err == nil {
		t.Errorf("the operator's BASH_ENV ran on the leader's host: %s", data)
	}

	// The audit trail says what each refused commit tried.
	var trail, refused []auditEntryJSON
	if err := json.Unmarshal([]byte(mgmtRun(t, c, "audit", "--call", "CommitGroup", "--who", "who-operator", "-o", "json")), &trail); err != nil {
		t.Fatal(err)
	}
	for _, e := range trail {
		if strings.HasPrefix(e.Outcome, "PermissionDenied") {
			refused = append(refused, e)
		}
	}
	if len(refused) != 2 {
		t.Fatalf("the operator's commits in the trail: %+v, want two refused", trail)
	}
	for i, want := range []string{`provider.process.binary: "" -> "/bin/bash"`, `template.env: +"BASH_ENV" (values not shown)`} {
		if e := refused[i]; !strings.Contains(e.Changes, want) || !strings.Contains(e.Changes, "size: 0 -> 1") {
			t.Errorf("the audit entry of the operator's refused commit %d: %+v; want it saying %q", i, e, want)
		}
	}
	table := mgmtRun(t, c, "audit", "--call", "CommitGroup")
	if !strings.Contains(table, `set size: 0 -> 1; provider.process.binary: "" -> "/bin/bash"`) {
		t.Errorf("audit does not show what the commits set:\n%s", table)
	}
	if strings.Contains(table, "id >") {
		t.Errorf("audit shows an environment value:\n%s", table)
	}
}
