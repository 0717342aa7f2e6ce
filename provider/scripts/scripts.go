package scripts

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/curatorproject/curator/provider"
	"github.com/curatorproject/curator/provider/plugin"
)

// The config keys naming the scripts.
const (
	KeyProvision = "provision"
	KeyDestroy   = "destroy"
	KeyList      = "list"
	KeyLastWords = "last-words"
)

// The environment variables of the contract.
const (
	EnvInstanceID = "CURATOR_INSTANCE_ID"
	EnvLabels     = "CURATOR_LABELS"
	EnvDomain     = "CURATOR_DOMAIN"
	EnvManager    = "CURATOR_MANAGER"
	EnvAgentEnv   = "CURATOR_AGENT_ENV"
	EnvSelector   = "CURATOR_SELECTOR"
	// EnvConfigPrefix prefixes each config entry's variable.
	EnvConfigPrefix = "CURATOR_CONFIG_"
)

// IDPrefix begins the ID of each machine the provider makes.
const IDPrefix = "exec-"

// pipeWait is how long a script's output may stay open after it exited
// (a process it left running that kept it): then it is closed.
const pipeWait = 2 * time.Second

// Provider runs the scripts of its config. Its methods may be called
// concurrently: each call runs its own script.
type Provider struct {
	scripts map[string]string // key: path
	env     []string          // the config's variables
}

var (
	_ provider.Provider  = (*Provider)(nil)
	_ provider.LastWords = (*Provider)(nil)
)

// New returns the Provider of config: the scripts it names must be
// executable files, at absolute paths.
func New(config map[string]string) (provider.Provider, error) {
	p := &Provider{scripts: map[string]string{}}
	var errs []error
	if err := plugin.CheckConfig(config); err != nil {
		return nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(config)) {
		p.env = append(p.env, EnvConfigPrefix+strings.ToUpper(strings.ReplaceAll(k, "-", "_"))+"="+config[k])
	}
	for _, k := range []string{KeyProvision, KeyDestroy, KeyList, KeyLastWords} {
		path, ok := config[k]
		if !ok {
			if k != KeyLastWords {
				errs = append(errs, fmt.Errorf("%s: the script is required", k))
			}
			continue
		}
		if err := checkScript(path); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", k, err))
			continue
		}
		p.scripts[k] = path
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

// checkScript says why path could not be run as a script, if it could
// not.
func checkScript(path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("%q is not an absolute path", path)
	}
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%q is not a regular file", path)
	case fi.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("%q is not executable (mode %s)", path, fi.Mode().Perm())
	}
	return nil
}

// machine is a machine line: what provision and list print of a machine.
type machine struct {
	ID      string            `json:"id"`
	Labels  map[string]string `json:"labels"`
	Address string            `json:"address"`
	Domain  string            `json:"domain"`
	Created *time.Time        `json:"created"`
}

func (m machine) instance() provider.Instance {
	in := provider.Instance{ID: m.ID, Labels: m.Labels, Address: m.Address, Domain: m.Domain}
	if m.Created != nil {
		in.Created = *m.Created
	}
	return in
}

// Provision runs the provision script for a new machine of spec, under a
// new ID.
func (p *Provider) Provision(ctx context.Context, spec provider.Spec) (provider.Instance, error) {
	b := make([]byte, 4)
	rand.Read(b)
	id := IDPrefix + hex.EncodeToString(b)
	labels, _ := json.Marshal(orEmpty(spec.Labels))
	args := make([]string, len(spec.Args))
	for i, a := range spec.Args {
		args[i] = strings.ReplaceAll(a, provider.PlaceholderInstanceID, id)
	}
	var env []string
	names := slices.Sorted(maps.Keys(spec.Env))
	for _, k := range names {
		env = append(env, k+"="+spec.Env[k])
	}
	env = append(env,
		EnvInstanceID+"="+id,
		EnvLabels+"="+string(labels),
		EnvDomain+"="+spec.Domain,
		fmt.Sprintf("%s=%t", EnvManager, spec.Manager),
		EnvAgentEnv+"="+strings.Join(names, " "),
	)
	out, err := p.run(ctx, KeyProvision, args, env)
	if err != nil {
		return provider.Instance{}, fmt.Errorf("provision %s: %w", id, err)
	}
	ms, err := machines(out)
	if err != nil {
		return provider.Instance{}, fmt.Errorf("provision %s: %w", id, err)
	}
	m := machine{ID: id}
	switch {
	case len(ms) > 1:
		return provider.Instance{}, fmt.Errorf("provision %s: the script printed %d machines, want one", id, len(ms))
	case len(ms) == 1 && ms[0].ID != id:
		return provider.Instance{}, fmt.Errorf("provision %s: the script printed machine %q, want %s (%s)", id, ms[0].ID, id, EnvInstanceID)
	case len(ms) == 1:
		m = ms[0]
	}
	if m.Labels == nil {
		m.Labels = maps.Clone(spec.Labels)
	}
	if m.Created == nil {
		now := time.Now()
		m.Created = &now
	}
	return m.instance(), nil
}

// Destroy runs the destroy script for machine id.
func (p *Provider) Destroy(ctx context.Context, id string) error {
	if _, err := p.run(ctx, KeyDestroy, []string{id}, []string{EnvInstanceID + "=" + id}); err != nil {
		return fmt.Errorf("destroy %s: %w", id, err)
	}
	return nil
}

// List runs the list script and returns the machines it printed whose
// labels match selector, by ID.
func (p *Provider) List(ctx context.Context, selector map[string]string) ([]provider.Instance, error) {
	sel, _ := json.Marshal(orEmpty(selector))
	out, err := p.run(ctx, KeyList, nil, []string{EnvSelector + "=" + string(sel)})
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	ms, err := machines(out)
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	var insts []provider.Instance
	for _, m := range ms {
		if provider.Matches(m.Labels, selector) {
			insts = append(insts, m.instance())
		}
	}
	slices.SortFunc(insts, func(a, b provider.Instance) int { return strings.Compare(a.ID, b.ID) })
	return insts, nil
}

// LastWords runs the last-words script, if there is one, and returns the
// last line it printed.
func (p *Provider) LastWords(ctx context.Context, id string) (string, error) {
	if p.scripts[KeyLastWords] == "" {
		return "", nil
	}
	out, err := p.run(ctx, KeyLastWords, []string{id}, []string{EnvInstanceID + "=" + id})
	if err != nil {
		return "", fmt.Errorf("last words of %s: %w", id, err)
	}
	if len(bytes.TrimSpace(out)) == 0 {
		return "", nil
	}
	return provider.LastLine(out), nil
}

// machines reads machine lines; blank lines are skipped.
func machines(out []byte) ([]machine, error) {
	var ms []machine
	for i, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		var m machine
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&m); err != nil {
			return nil, fmt.Errorf("line %d of the output is not a machine line (a JSON object of id, labels, address, domain, created): %v: %s", i+1, err, provider.LastLine([]byte(line)))
		}
		if m.ID == "" {
			return nil, fmt.Errorf("line %d of the output names no id: %s", i+1, provider.LastLine([]byte(line)))
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// run runs script key with args and env added to the plugin's own
// environment and the config's variables, and returns its stdout. Its
// stderr goes to the plugin's (the leader's log); a status other than 0
// is an error with its last line. When ctx ends (the leader's deadline),
// the script's process group is killed.
func (p *Provider) run(ctx context.Context, key string, args, env []string) ([]byte, error) {
	path := p.scripts[key]
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = slices.Concat(pluginEnv(), p.env, env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = pipeWait
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &tee{buf: &stderr, to: os.Stderr, prefix: key + ": "}
	err := cmd.Run()
	if errors.Is(err, exec.ErrWaitDelay) {
		// It exited 0, and something it started holds its output.
		fmt.Fprintf(os.Stderr, "%s: %s exited, and a process it left running kept its stdout or stderr open %v: redirect that process's output\n", key, path, pipeWait)
		err = nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("script %s: %w", path, ctx.Err())
		}
		why := provider.LastLine(stderr.Bytes())
		if why == "" {
			why = "it wrote nothing to stderr"
		}
		return nil, fmt.Errorf("script %s: %v: %s", path, err, why)
	}
	return stdout.Bytes(), nil
}

// tee keeps a script's stderr and copies it, line by line with a prefix,
// to the plugin's.
type tee struct {
	buf    *bytes.Buffer
	to     *os.File
	prefix string
	line   []byte
}

func (t *tee) Write(b []byte) (int, error) {
	t.buf.Write(b)
	if t.buf.Len() > 64<<10 {
		rest := t.buf.Bytes()[t.buf.Len()-8<<10:]
		t.buf.Reset()
		t.buf.Write(rest)
	}
	t.line = append(t.line, b...)
	for {
		i := bytes.IndexByte(t.line, '\n')
		if i < 0 {
			return len(b), nil
		}
		fmt.Fprintf(t.to, "%s%s\n", t.prefix, t.line[:i])
		t.line = t.line[i+1:]
	}
}

// pluginEnv is the plugin's environment without what go-plugin set for
// the handshake, which is not the scripts' business.
func pluginEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "PLUGIN_") || strings.HasPrefix(kv, plugin.Handshake.MagicCookieKey+"=")
	})
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
