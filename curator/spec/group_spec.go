package spec

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/provider/plugin"
	"github.com/curatorproject/curator/provider/process"
)

// A group file is YAML (docs/architecture.md, "Groups"). It is read
// field by field from the YAML tree rather than unmarshalled into a struct,
// so that every error names the field and the line it is on, and an unknown
// field is an error rather than silently ignored: a typo in `replace_after`
// must not leave a group replacing machines after the default.
//
// A committed spec is normalized (defaults written out, roles in one order)
// and printed back in the same format, so that `group describe -o yaml`
// piped to `group commit` is a no-op.

// Defaults and limits of group specs.
const (
	DefaultGroupReplaceAfter = time.Minute
	DefaultGroupJoinTimeout  = 3 * time.Minute
	DefaultGroupPort         = 7000
	DefaultGroupImage        = "curator:dev"
	// MaxGroupSize bounds one group; a larger fleet is several groups.
	MaxGroupSize = 10000
	// A rollout's policy (rollout:): a new machine counts once its node
	// has been ready for DefaultRolloutMonitor, and fails when it is not
	// within DefaultRolloutProgressDeadline of being made; the first
	// failed machine fails the rollout, which rolls the group back. A
	// new worker comes before an old one goes (max_surge 1,
	// max_unavailable 0), as managers always do.
	DefaultRolloutMonitor          = 5 * time.Second
	DefaultRolloutProgressDeadline = 3 * time.Minute
	DefaultRolloutMaxFailures      = 1
	DefaultRolloutFailureAction    = RolloutRollback
	DefaultRolloutMaxSurge         = 1
	DefaultRolloutMaxUnavailable   = 0
	// The repair ceiling and budget: past DefaultGroupMaxUnhealthy of a
	// group unhealthy, or DefaultGroupMaxReplacements machines replaced
	// in DefaultGroupReplacementWindow, the group loop replaces nothing.
	DefaultGroupMaxUnhealthy      = "40%"
	DefaultGroupMaxReplacements   = 10
	DefaultGroupReplacementWindow = 10 * time.Minute
	// The failure actions of a rollout policy.
	RolloutRollback = "rollback"
	RolloutPause    = "pause"
)

// groupFields are a group file's top-level fields, in the order they are
// printed.
var (
	groupFields    = []string{"revision", "name", "size", "roles", "domains", "domain_hold", "max_parallel", "replace_after", "join_timeout", "max_unhealthy", "max_replacements", "replacement_window", "rollout", "provider", "template"}
	rolloutFields  = []string{"monitor", "progress_deadline", "max_failures", "failure_action", "max_surge", "max_unavailable"}
	processFields  = []string{"addresses", "domains", "port", "dir", "binary"}
	dockerFields   = []string{"network", "subnet", "image", "port", "engines"}
	pluginFields   = []string{"path", "config"}
	templateFields = []string{"version", "labels", "args", "env"}
)

// specError is an error about one field of a group file.
func specError(n *yaml.Node, field, format string, args ...any) error {
	return fmt.Errorf("line %d: %s: %s", n.Line, field, fmt.Sprintf(format, args...))
}

// ParseGroupSpec reads a group file and returns the spec it gives,
// normalized and validated. Its errors name the field and its line.
func ParseGroupSpec(data []byte) (*pb.GroupSpec, error) {
	s, _, err := ParseGroupFile(data)
	return s, err
}

// ParseGroupFile is ParseGroupSpec with the file's revision: the group's
// spec revision it was read at (`group describe` writes it), which a
// commit checks; nil when the file has none.
func ParseGroupFile(data []byte) (*pb.GroupSpec, *uint64, error) {
	var revision *uint64
	spec, err := parseGroupFile(data, &revision)
	return spec, revision, err
}

func parseGroupFile(data []byte, revision **uint64) (*pb.GroupSpec, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("not a YAML group file: %w", err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("a group file is a YAML mapping: name, size, roles, provider, template")
	}
	spec := &pb.GroupSpec{}
	fields, err := mapping(doc.Content[0], "group", groupFields)
	if err != nil {
		return nil, err
	}
	for _, f := range fields {
		switch f.key {
		case "revision":
			var v string
			if v, err = scalar(f.value, f.key); err == nil {
				r, perr := strconv.ParseUint(v, 10, 64)
				if perr != nil {
					err = specError(f.value, f.key, "want the whole number `group describe` wrote, got %s (leave it out to commit without the check)", QuoteShort(v))
				}
				*revision = &r
			}
		case "name":
			spec.Name, err = scalar(f.value, f.key)
			if err == nil {
				if verr := ValidateGroupName(spec.Name); verr != nil {
					err = specError(f.value, f.key, "%v", verr)
				}
			}
		case "size":
			spec.Size, err = whole(f.value, f.key, MaxGroupSize)
		case "roles":
			spec.Roles, err = roles(f.value)
		case "domains":
			spec.Domains, err = stringList(f.value, f.key)
		case "domain_hold":
			spec.DomainHold, err = duration(f.value, f.key)
		case "max_parallel":
			spec.MaxParallel, err = whole(f.value, f.key, MaxGroupSize)
			if err == nil && spec.MaxParallel == 0 {
				err = specError(f.value, f.key, "want 1 or more: 0 would never replace a machine (leave it out for the default, 1)")
			}
		case "replace_after":
			spec.ReplaceAfter, err = duration(f.value, f.key)
		case "join_timeout":
			spec.JoinTimeout, err = duration(f.value, f.key)
		case "max_unhealthy":
			spec.MaxUnhealthy, err = scalar(f.value, f.key)
			if err == nil {
				if _, verr := ParseMaxUnhealthy(spec.MaxUnhealthy); verr != nil {
					err = specError(f.value, f.key, "%v", verr)
				}
			}
		case "max_replacements":
			spec.MaxReplacements, err = whole(f.value, f.key, MaxGroupSize)
			if err == nil && spec.MaxReplacements == 0 {
				err = specError(f.value, f.key, "want 1 or more: 0 would never replace a machine (leave it out for the default, %d)", DefaultGroupMaxReplacements)
			}
		case "replacement_window":
			spec.ReplacementWindow, err = duration(f.value, f.key)
		case "rollout":
			spec.Rollout, err = rolloutPolicy(f.value)
		case "provider":
			spec.Provider, err = providerSpec(f.value)
		case "template":
			spec.Template, err = template(f.value)
		}
		if err != nil {
			return nil, err
		}
	}
	for _, required := range []string{"name", "roles", "provider"} {
		if !slices.ContainsFunc(fields, func(f field) bool { return f.key == required }) {
			return nil, fmt.Errorf("line %d: %s is required", doc.Content[0].Line, required)
		}
	}
	NormalizeGroupSpec(spec)
	if err := ValidateGroupSpec(spec); err != nil {
		return nil, withLine(err, fields, doc.Content[0])
	}
	return spec, nil
}

// withLine puts the line of the top-level field a validation error names
// (its first word, "rollout.max_surge: ..." is of rollout) before it.
func withLine(err error, fields []field, root *yaml.Node) error {
	msg := err.Error()
	top, _, _ := strings.Cut(strings.SplitN(msg, ":", 2)[0], ".")
	line := root.Line
	for _, f := range fields {
		if f.key == top {
			line = f.value.Line
		}
	}
	return fmt.Errorf("line %d: %w", line, err)
}

// rolloutPolicy reads the rollout: mapping.
func rolloutPolicy(n *yaml.Node) (*pb.RolloutPolicy, error) {
	fields, err := mapping(n, "rollout", rolloutFields)
	if err != nil {
		return nil, err
	}
	r := &pb.RolloutPolicy{}
	for _, f := range fields {
		name := "rollout." + f.key
		switch f.key {
		case "monitor":
			r.Monitor, err = duration(f.value, name)
		case "progress_deadline":
			r.ProgressDeadline, err = duration(f.value, name)
		case "max_failures":
			r.MaxFailures, err = whole(f.value, name, MaxGroupSize)
			if err == nil && r.MaxFailures == 0 {
				err = specError(f.value, name, "want at least 1")
			}
		case "failure_action":
			r.FailureAction, err = scalar(f.value, name)
			if err == nil && r.FailureAction != RolloutRollback && r.FailureAction != RolloutPause {
				err = specError(f.value, name, "want %s or %s, got %s", RolloutRollback, RolloutPause, QuoteShort(r.FailureAction))
			}
		case "max_surge":
			var v uint32
			v, err = whole(f.value, name, MaxGroupSize)
			r.MaxSurge = &v
		case "max_unavailable":
			var v uint32
			v, err = whole(f.value, name, MaxGroupSize)
			r.MaxUnavailable = &v
		}
		if err != nil {
			return nil, err
		}
	}
	return r, nil
}

// field is one key: value of a YAML mapping.
type field struct {
	key   string
	value *yaml.Node
}

// mapping returns n's fields, refusing unknown and repeated keys.
func mapping(n *yaml.Node, what string, known []string) ([]field, error) {
	if n.Kind != yaml.MappingNode {
		return nil, specError(n, what, "want a mapping with %s", strings.Join(known, ", "))
	}
	var out []field
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !slices.Contains(known, k.Value) {
			return nil, specError(k, what, "unknown field %s (known: %s)", QuoteShort(k.Value), strings.Join(known, ", "))
		}
		if slices.ContainsFunc(out, func(f field) bool { return f.key == k.Value }) {
			return nil, specError(k, what, "%s is given twice", k.Value)
		}
		out = append(out, field{k.Value, v})
	}
	return out, nil
}

func scalar(n *yaml.Node, name string) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", specError(n, name, "want a single value")
	}
	return n.Value, nil
}

func whole(n *yaml.Node, name string, max uint32) (uint32, error) {
	s, err := scalar(n, name)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil || v > uint64(max) {
		return 0, specError(n, name, "want a whole number from 0 to %d, got %s", max, QuoteShort(s))
	}
	return uint32(v), nil
}

func duration(n *yaml.Node, name string) (*durationpb.Duration, error) {
	s, err := scalar(n, name)
	if err != nil {
		return nil, err
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return nil, specError(n, name, "want a positive duration such as 90s or 5m, got %s", QuoteShort(s))
	}
	return durationpb.New(d), nil
}

func stringList(n *yaml.Node, name string) ([]string, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, specError(n, name, "want a list, such as [a, b]")
	}
	var out []string
	for _, item := range n.Content {
		s, err := scalar(item, name)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func stringMap(n *yaml.Node, name string, check func(k, v string) error) (map[string]string, error) {
	if n.Kind != yaml.MappingNode {
		return nil, specError(n, name, "want a mapping, such as {key: value}")
	}
	out := map[string]string{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		val, err := scalar(v, name+" "+QuoteShort(k.Value))
		if err != nil {
			return nil, err
		}
		if _, dup := out[k.Value]; dup {
			return nil, specError(k, name, "%s is given twice", QuoteShort(k.Value))
		}
		if check != nil {
			if err := check(k.Value, val); err != nil {
				return nil, specError(k, name, "%v", err)
			}
		}
		out[k.Value] = val
	}
	return out, nil
}

// roleWords are the words a group file uses for roles.
var roleWords = map[string]pb.Role{"consensus": pb.Role_ROLE_CONSENSUS, "worker": pb.Role_ROLE_WORKER}

func roles(n *yaml.Node) ([]pb.Role, error) {
	words, err := stringList(n, "roles")
	if err != nil {
		return nil, err
	}
	var out []pb.Role
	for _, w := range words {
		r, ok := roleWords[w]
		if !ok {
			return nil, specError(n, "roles", "unknown role %s: use worker, consensus, or both", QuoteShort(w))
		}
		if slices.Contains(out, r) {
			return nil, specError(n, "roles", "%s is given twice", w)
		}
		out = append(out, r)
	}
	return out, nil
}

func providerSpec(n *yaml.Node) (*pb.ProviderSpec, error) {
	fields, err := mapping(n, "provider", []string{"process", "docker", "plugin"})
	if err != nil {
		return nil, err
	}
	if len(fields) != 1 {
		return nil, specError(n, "provider", "name exactly one provider: process, docker or plugin")
	}
	f := fields[0]
	switch f.key {
	case "plugin":
		return pluginSpec(f.value)
	case "process":
		fs, err := mapping(f.value, "provider.process", processFields)
		if err != nil {
			return nil, err
		}
		p := &pb.ProcessProviderSpec{}
		for _, x := range fs {
			name := "provider.process." + x.key
			switch x.key {
			case "addresses":
				p.Addresses, err = scalar(x.value, name)
				if err == nil {
					_, err = process.AddressRange(p.Addresses, 1)
					if err != nil {
						err = specError(x.value, name, "%v", err)
					}
				}
			case "domains":
				p.Domains, err = processDomains(x.value, name)
			case "port":
				p.Port, err = whole(x.value, name, 65535-3)
			case "dir":
				p.Dir, err = scalar(x.value, name)
				if err == nil && !filepath.IsAbs(p.Dir) {
					err = specError(x.value, name, "want an absolute path, got %s", QuoteShort(p.Dir))
				}
			case "binary":
				p.Binary, err = scalar(x.value, name)
			}
			if err != nil {
				return nil, err
			}
		}
		return &pb.ProviderSpec{Kind: &pb.ProviderSpec_Process{Process: p}}, nil
	default:
		fs, err := mapping(f.value, "provider.docker", dockerFields)
		if err != nil {
			return nil, err
		}
		d := &pb.DockerProviderSpec{}
		for _, x := range fs {
			name := "provider.docker." + x.key
			switch x.key {
			case "network":
				d.Network, err = scalar(x.value, name)
			case "subnet":
				d.Subnet, err = scalar(x.value, name)
				if err == nil {
					if p, perr := netip.ParsePrefix(d.Subnet); perr != nil || !p.Addr().Is4() {
						err = specError(x.value, name, "want an IPv4 subnet such as 172.28.0.0/24, got %s", QuoteShort(d.Subnet))
					}
				}
			case "image":
				d.Image, err = scalar(x.value, name)
			case "port":
				d.Port, err = whole(x.value, name, 65535-3)
			case "engines":
				d.Engines, err = dockerEngines(x.value, name)
			}
			if err != nil {
				return nil, err
			}
		}
		return &pb.ProviderSpec{Kind: &pb.ProviderSpec_Docker{Docker: d}}, nil
	}
}

// pluginSpec reads provider.plugin: the executable's absolute path, and
// its config, a mapping of text (a timeout the leader reads too).
func pluginSpec(n *yaml.Node) (*pb.ProviderSpec, error) {
	fs, err := mapping(n, "provider.plugin", pluginFields)
	if err != nil {
		return nil, err
	}
	p := &pb.PluginProviderSpec{}
	for _, x := range fs {
		name := "provider.plugin." + x.key
		switch x.key {
		case "path":
			p.Path, err = scalar(x.value, name)
			if err == nil && !filepath.IsAbs(p.Path) {
				err = specError(x.value, name, "want the plugin's absolute path on the leader's host, got %s", QuoteShort(p.Path))
			}
		case "config":
			p.Config, err = stringMap(x.value, name, nil)
			if err == nil {
				if cerr := plugin.CheckConfig(p.Config); cerr != nil {
					err = specError(x.value, name, "%v", cerr)
				}
			}
		}
		if err != nil {
			return nil, err
		}
	}
	if p.Path == "" {
		return nil, specError(n, "provider.plugin", "path is required: the plugin's executable on the leader's host")
	}
	return &pb.ProviderSpec{Kind: &pb.ProviderSpec_Plugin{Plugin: p}}, nil
}

func template(n *yaml.Node) (*pb.InstanceTemplate, error) {
	fields, err := mapping(n, "template", templateFields)
	if err != nil {
		return nil, err
	}
	t := &pb.InstanceTemplate{}
	for _, f := range fields {
		name := "template." + f.key
		switch f.key {
		case "version":
			t.Version, err = scalar(f.value, name)
		case "labels":
			t.Labels, err = stringMap(f.value, name, ValidateLabel)
		case "args":
			t.Args, err = stringList(f.value, name)
		case "env":
			t.Env, err = stringMap(f.value, name, func(k, _ string) error { return ValidateEnvName(k) })
		}
		if err != nil {
			return nil, err
		}
	}
	return t, nil
}

// NormalizeGroupSpec writes a spec's defaults out and puts its roles in one
// order, so that two specs that mean the same are equal.
func NormalizeGroupSpec(s *pb.GroupSpec) {
	slices.Sort(s.Roles)
	s.MaxParallel = cmp.Or(s.MaxParallel, 1)
	if s.ReplaceAfter == nil {
		s.ReplaceAfter = durationpb.New(DefaultGroupReplaceAfter)
	}
	if s.JoinTimeout == nil {
		s.JoinTimeout = durationpb.New(DefaultGroupJoinTimeout)
	}
	if s.Template == nil {
		s.Template = &pb.InstanceTemplate{}
	}
	s.MaxUnhealthy = cmp.Or(s.MaxUnhealthy, DefaultGroupMaxUnhealthy)
	s.MaxReplacements = cmp.Or(s.MaxReplacements, DefaultGroupMaxReplacements)
	if s.ReplacementWindow == nil {
		s.ReplacementWindow = durationpb.New(DefaultGroupReplacementWindow)
	}
	s.Rollout = NormalRolloutPolicy(s.Rollout)
	switch p := s.GetProvider().GetKind().(type) {
	case *pb.ProviderSpec_Process:
		p.Process.Port = cmp.Or(p.Process.Port, DefaultGroupPort)
	case *pb.ProviderSpec_Docker:
		p.Docker.Port = cmp.Or(p.Docker.Port, DefaultGroupPort)
		p.Docker.Image = cmp.Or(p.Docker.Image, DefaultGroupImage)
	}
	normalizeDomains(s)
}

// normalRolloutPolicy is r with its defaults written out (a new policy if
// r is nil: a group committed before there were policies has the
// defaults).
func NormalRolloutPolicy(r *pb.RolloutPolicy) *pb.RolloutPolicy {
	if r == nil {
		r = &pb.RolloutPolicy{}
	}
	if r.Monitor == nil {
		r.Monitor = durationpb.New(DefaultRolloutMonitor)
	}
	if r.ProgressDeadline == nil {
		r.ProgressDeadline = durationpb.New(DefaultRolloutProgressDeadline)
	}
	r.MaxFailures = cmp.Or(r.MaxFailures, DefaultRolloutMaxFailures)
	r.FailureAction = cmp.Or(r.FailureAction, DefaultRolloutFailureAction)
	if r.MaxSurge == nil {
		r.MaxSurge = proto.Uint32(DefaultRolloutMaxSurge)
	}
	if r.MaxUnavailable == nil {
		r.MaxUnavailable = proto.Uint32(DefaultRolloutMaxUnavailable)
	}
	return r
}

// validateRolloutPolicy checks a normalized policy of a group whose
// machines are consensus members or not.
func validateRolloutPolicy(r *pb.RolloutPolicy, consensus bool, maxParallel uint32) []error {
	var errs []error
	mon, dl := r.GetMonitor().AsDuration(), r.GetProgressDeadline().AsDuration()
	if mon <= 0 {
		errs = append(errs, fmt.Errorf("rollout.monitor: want a positive duration, got %v", mon))
	}
	if dl <= mon {
		errs = append(errs, fmt.Errorf("rollout.progress_deadline: %v leaves no time to join and be ready for rollout.monitor %v: want more than it", dl, mon))
	}
	if r.MaxFailures == 0 {
		errs = append(errs, errors.New("rollout.max_failures: want at least 1"))
	}
	if r.FailureAction != RolloutRollback && r.FailureAction != RolloutPause {
		errs = append(errs, fmt.Errorf("rollout.failure_action: want %s or %s, got %s", RolloutRollback, RolloutPause, QuoteShort(r.FailureAction)))
	}
	surge, unavail := r.GetMaxSurge(), r.GetMaxUnavailable()
	switch {
	case consensus && (surge != 1 || unavail != 0):
		errs = append(errs, fmt.Errorf("rollout: a consensus group rolls one member at a time, a new one first: want max_surge 1 and max_unavailable 0, got %d and %d", surge, unavail))
	case surge == 0 && unavail == 0:
		errs = append(errs, errors.New("rollout: max_surge and max_unavailable are both 0: the rollout could neither make a new machine nor take an old one away; give one of them at least 1"))
	case surge > maxParallel:
		errs = append(errs, fmt.Errorf("rollout.max_surge: %d is more than max_parallel %d, the machines a rollout has in flight at once: raise max_parallel or lower max_surge", surge, maxParallel))
	case unavail > maxParallel:
		errs = append(errs, fmt.Errorf("rollout.max_unavailable: %d is more than max_parallel %d, the machines a rollout has in flight at once: raise max_parallel or lower max_unavailable", unavail, maxParallel))
	}
	return errs
}

// ValidateGroupSpec checks a normalized spec: what the server checks on
// commit, whatever client sent it.
func ValidateGroupSpec(s *pb.GroupSpec) error {
	var errs []error
	if err := unknownFields(s.ProtoReflect(), ""); err != nil {
		// Kept nowhere: a describe would not show it, nor a commit of
		// that describe carry it.
		errs = append(errs, err)
	}
	if err := ValidateGroupName(s.Name); err != nil {
		errs = append(errs, fmt.Errorf("name: %w", err))
	}
	if s.Size > MaxGroupSize {
		errs = append(errs, fmt.Errorf("size: %d is more than %d", s.Size, MaxGroupSize))
	}
	if len(s.Roles) == 0 {
		errs = append(errs, errors.New("roles: give worker, consensus, or both"))
	}
	for _, r := range s.Roles {
		if r != pb.Role_ROLE_CONSENSUS && r != pb.Role_ROLE_WORKER {
			errs = append(errs, fmt.Errorf("roles: unknown role %v", r))
		}
	}
	if d := s.GetReplaceAfter().AsDuration(); d <= 0 {
		errs = append(errs, fmt.Errorf("replace_after: want a positive duration, got %v", d))
	}
	if d := s.GetJoinTimeout().AsDuration(); d <= 0 {
		errs = append(errs, fmt.Errorf("join_timeout: want a positive duration, got %v", d))
	}
	if _, err := ParseMaxUnhealthy(cmp.Or(s.MaxUnhealthy, DefaultGroupMaxUnhealthy)); err != nil {
		errs = append(errs, fmt.Errorf("max_unhealthy: %w", err))
	}
	if d := s.GetReplacementWindow(); d != nil && d.AsDuration() <= 0 {
		errs = append(errs, fmt.Errorf("replacement_window: want a positive duration, got %v", d.AsDuration()))
	}
	pol := s.GetRollout()
	if pol == nil {
		pol = NormalRolloutPolicy(nil) // a spec of before policies
	}
	errs = append(errs, validateRolloutPolicy(pol, slices.Contains(s.Roles, pb.Role_ROLE_CONSENSUS), max(1, s.MaxParallel))...)
	switch p := s.GetProvider().GetKind().(type) {
	case *pb.ProviderSpec_Process:
		switch {
		case len(p.Process.Domains) > 0 && p.Process.Addresses != "":
			errs = append(errs, errors.New("provider.process: give addresses (one range) or domains (a range per failure domain), not both"))
		case len(p.Process.Domains) == 0:
			if _, err := process.AddressRange(p.Process.Addresses, 1); err != nil {
				errs = append(errs, fmt.Errorf("provider.process.addresses: %w", err))
			}
		}
		if !filepath.IsAbs(p.Process.Dir) {
			errs = append(errs, fmt.Errorf("provider.process.dir: want an absolute path, got %s", QuoteShort(p.Process.Dir)))
		}
	case *pb.ProviderSpec_Docker:
		if p.Docker.Network == "" {
			errs = append(errs, errors.New("provider.docker.network is required"))
		}
		if pre, err := netip.ParsePrefix(p.Docker.Subnet); err != nil || !pre.Addr().Is4() {
			errs = append(errs, fmt.Errorf("provider.docker.subnet: want an IPv4 subnet such as 172.28.0.0/24, got %s", QuoteShort(p.Docker.Subnet)))
		}
	case *pb.ProviderSpec_Plugin:
		if !filepath.IsAbs(p.Plugin.Path) {
			errs = append(errs, fmt.Errorf("provider.plugin.path: want the plugin's absolute path on the leader's host, got %s", QuoteShort(p.Plugin.Path)))
		}
		if err := plugin.CheckConfig(p.Plugin.Config); err != nil {
			errs = append(errs, fmt.Errorf("provider.plugin.%w", err))
		}
	default:
		errs = append(errs, errors.New("provider: name exactly one provider: process, docker or plugin"))
	}
	for _, k := range slices.Sorted(maps.Keys(s.GetTemplate().GetLabels())) {
		if err := ValidateLabel(k, s.Template.Labels[k]); err != nil {
			errs = append(errs, fmt.Errorf("template.labels: %w", err))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.GetTemplate().GetEnv())) {
		if err := ValidateEnvName(k); err != nil {
			errs = append(errs, fmt.Errorf("template.env: %w", err))
		}
	}
	errs = append(errs, validateDomains(s)...)
	errs = append(errs, validateGroupValues(s)...)
	return errors.Join(errs...)
}

// maxUnhealthy is a group's repair ceiling: a count, or a percentage
// of the size.
type maxUnhealthy struct {
	count   int
	percent int // 0: a count
}

// ParseMaxUnhealthy reads a max_unhealthy: a count of machines ("2", at
// least 1) or a percentage of the group's size ("40%", 1% to 100%).
func ParseMaxUnhealthy(s string) (maxUnhealthy, error) {
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.Atoi(p)
		if err != nil || v < 1 || v > 100 {
			return maxUnhealthy{}, fmt.Errorf("want a count such as 2 or a percentage of the size from 1%% to 100%% such as 40%%, got %s", QuoteShort(s))
		}
		return maxUnhealthy{percent: v}, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 || v > MaxGroupSize {
		return maxUnhealthy{}, fmt.Errorf("want a count from 1 to %d such as 2, or a percentage of the size such as 40%%, got %s", MaxGroupSize, QuoteShort(s))
	}
	return maxUnhealthy{count: v}, nil
}

// of is the ceiling for a group of size machines: a percentage rounds
// down, but never below 1 (one machine down of a small group is always
// replaced: one alone says nothing of the network).
func (m maxUnhealthy) Of(size int) int {
	if m.percent == 0 {
		return m.count
	}
	return max(1, size*m.percent/100)
}

// GroupConfigSHA is the SHA-256 (hex) of a template's canonical form: JSON
// with the fields in a fixed order and map keys sorted, empty lists and
// maps as [] and {}. Machines made from another SHA are due for a roll.
// The release's digest is in it when the template records one (what the
// machines run, by content: not its path or tag); a template without
// one has the SHA it had before releases were recorded.
func GroupConfigSHA(t *pb.InstanceTemplate) string {
	canonical := struct {
		Version string            `json:"version"`
		Labels  map[string]string `json:"labels"`
		Args    []string          `json:"args"`
		Env     map[string]string `json:"env"`
		Release string            `json:"release,omitempty"`
	}{t.GetVersion(), nonNilMap(t.GetLabels()), nonNilSlice(t.GetArgs()), nonNilMap(t.GetEnv()), t.GetRelease().GetDigest()}
	b, err := json.Marshal(canonical)
	if err != nil {
		panic(err) // strings only: cannot fail
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func nonNilSlice(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// MarshalGroupFile is MarshalGroupSpec with the group's spec revision
// first (`revision: N`): a commit of the file is refused once the group's
// spec has changed since (ParseGroupFile).
func MarshalGroupFile(s *pb.GroupSpec, revision uint64) ([]byte, error) {
	out, err := MarshalGroupSpec(s)
	if err != nil {
		return nil, err
	}
	return append(fmt.Appendf(nil, "revision: %d\n", revision), out...), nil
}

// MarshalGroupSpec prints a spec in the group file's format.
func MarshalGroupSpec(s *pb.GroupSpec) ([]byte, error) {
	s = proto.Clone(s).(*pb.GroupSpec)
	NormalizeGroupSpec(s)
	kv := func(k string, v *yaml.Node) []*yaml.Node {
		return []*yaml.Node{{Kind: yaml.ScalarNode, Value: k}, v}
	}
	str := func(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v} }
	num := func(v uint32) *yaml.Node {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatUint(uint64(v), 10)}
	}
	flowList := func(items []string) *yaml.Node {
		n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for _, it := range items {
			n.Content = append(n.Content, str(it))
		}
		return n
	}
	flowMap := func(m map[string]string) *yaml.Node {
		n := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			n.Content = append(n.Content, kv(k, str(m[k]))...)
		}
		return n
	}
	var roleList []string
	for _, r := range s.Roles {
		for w, rr := range roleWords {
			if rr == r {
				roleList = append(roleList, w)
			}
		}
	}
	root := &yaml.Node{Kind: yaml.MappingNode}
	root.Content = append(root.Content, kv("name", str(s.Name))...)
	root.Content = append(root.Content, kv("size", num(s.Size))...)
	root.Content = append(root.Content, kv("roles", flowList(roleList))...)
	if len(s.Domains) > 0 {
		root.Content = append(root.Content, kv("domains", flowList(s.Domains))...)
		root.Content = append(root.Content, kv("domain_hold", str(s.DomainHold.AsDuration().String()))...)
	}
	root.Content = append(root.Content, kv("max_parallel", num(s.MaxParallel))...)
	root.Content = append(root.Content, kv("replace_after", str(s.ReplaceAfter.AsDuration().String()))...)
	root.Content = append(root.Content, kv("join_timeout", str(s.JoinTimeout.AsDuration().String()))...)
	root.Content = append(root.Content, kv("max_unhealthy", str(s.MaxUnhealthy))...)
	root.Content = append(root.Content, kv("max_replacements", num(s.MaxReplacements))...)
	root.Content = append(root.Content, kv("replacement_window", str(s.ReplacementWindow.AsDuration().String()))...)
	ro := &yaml.Node{Kind: yaml.MappingNode}
	ro.Content = append(ro.Content, kv("monitor", str(s.Rollout.Monitor.AsDuration().String()))...)
	ro.Content = append(ro.Content, kv("progress_deadline", str(s.Rollout.ProgressDeadline.AsDuration().String()))...)
	ro.Content = append(ro.Content, kv("max_failures", num(s.Rollout.MaxFailures))...)
	ro.Content = append(ro.Content, kv("failure_action", str(s.Rollout.FailureAction))...)
	ro.Content = append(ro.Content, kv("max_surge", num(s.Rollout.GetMaxSurge()))...)
	ro.Content = append(ro.Content, kv("max_unavailable", num(s.Rollout.GetMaxUnavailable()))...)
	root.Content = append(root.Content, kv("rollout", ro)...)
	prov := &yaml.Node{Kind: yaml.MappingNode}
	switch p := s.GetProvider().GetKind().(type) {
	case *pb.ProviderSpec_Process:
		m := &yaml.Node{Kind: yaml.MappingNode}
		if len(p.Process.Domains) == 0 || p.Process.Addresses != "" {
			m.Content = append(m.Content, kv("addresses", str(p.Process.Addresses))...)
		}
		if len(p.Process.Domains) > 0 {
			domains := &yaml.Node{Kind: yaml.MappingNode}
			for _, name := range slices.Sorted(maps.Keys(p.Process.Domains)) {
				domains.Content = append(domains.Content, kv(name, str(p.Process.Domains[name]))...)
			}
			m.Content = append(m.Content, kv("domains", domains)...)
		}
		m.Content = append(m.Content, kv("port", num(p.Process.Port))...)
		m.Content = append(m.Content, kv("dir", str(p.Process.Dir))...)
		if p.Process.Binary != "" {
			m.Content = append(m.Content, kv("binary", str(p.Process.Binary))...)
		}
		prov.Content = kv("process", m)
	case *pb.ProviderSpec_Docker:
		m := &yaml.Node{Kind: yaml.MappingNode}
		m.Content = append(m.Content, kv("network", str(p.Docker.Network))...)
		m.Content = append(m.Content, kv("subnet", str(p.Docker.Subnet))...)
		m.Content = append(m.Content, kv("image", str(p.Docker.Image))...)
		m.Content = append(m.Content, kv("port", num(p.Docker.Port))...)
		if len(p.Docker.Engines) > 0 {
			engines := &yaml.Node{Kind: yaml.MappingNode}
			for _, name := range slices.Sorted(maps.Keys(p.Docker.Engines)) {
				e := p.Docker.Engines[name]
				em := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
				em.Content = append(em.Content, kv("host", str(e.Host))...)
				if e.Subnet != "" {
					em.Content = append(em.Content, kv("subnet", str(e.Subnet))...)
				}
				engines.Content = append(engines.Content, kv(name, em)...)
			}
			m.Content = append(m.Content, kv("engines", engines)...)
		}
		prov.Content = kv("docker", m)
	case *pb.ProviderSpec_Plugin:
		m := &yaml.Node{Kind: yaml.MappingNode}
		m.Content = append(m.Content, kv("path", str(p.Plugin.Path))...)
		m.Content = append(m.Content, kv("config", flowMap(p.Plugin.Config))...)
		prov.Content = kv("plugin", m)
	}
	root.Content = append(root.Content, kv("provider", prov)...)
	tmpl := &yaml.Node{Kind: yaml.MappingNode}
	tmpl.Content = append(tmpl.Content, kv("version", str(s.Template.Version))...)
	tmpl.Content = append(tmpl.Content, kv("labels", flowMap(s.Template.Labels))...)
	tmpl.Content = append(tmpl.Content, kv("args", flowList(s.Template.Args))...)
	tmpl.Content = append(tmpl.Content, kv("env", flowMap(s.Template.Env))...)
	root.Content = append(root.Content, kv("template", tmpl)...)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ProviderFromRelease sets s's provider binary or image to the one its
// template's release names (a rollback's or an undo's template): the
// provider then makes machines of what ran with that template. A
// template without a release leaves the provider as it is.
func ProviderFromRelease(s *pb.GroupSpec) {
	r := s.GetTemplate().GetRelease()
	if r == nil {
		return
	}
	switch p := s.GetProvider().GetKind().(type) {
	case *pb.ProviderSpec_Process:
		p.Process.Binary = r.Binary
	case *pb.ProviderSpec_Docker:
		if r.Image != "" {
			p.Docker.Image = r.Image
		}
	case *pb.ProviderSpec_Plugin:
		// The keys an upgrade sets (UpgradeProvider), when the config
		// has them.
		if _, ok := p.Plugin.GetConfig()[PluginImage]; ok && r.Image != "" {
			p.Plugin.Config[PluginImage] = r.Image
		}
		if _, ok := p.Plugin.GetConfig()[PluginBinary]; ok && r.Binary != "" {
			p.Plugin.Config[PluginBinary] = r.Binary
		}
	}
}

// ReleaseOf is the release a template of s records when its provider
// runs the image (Docker) or a binary of digest: the binary as s names
// it ("" is the leader's own executable).
func ReleaseOf(s *pb.GroupSpec, image, digest string) *pb.MachineRelease {
	r := &pb.MachineRelease{Image: image, Digest: digest}
	if p := s.GetProvider().GetProcess(); p != nil {
		r.Binary = p.Binary
	}
	return r
}

// unknownFields says which field of m (at path) this release does not
// know, if any: a spec from a newer client, or bytes that are no spec.
func unknownFields(m protoreflect.Message, path string) error {
	if raw := m.GetUnknown(); len(raw) > 0 {
		num, _, _ := protowire.ConsumeTag(raw)
		where := "the spec"
		if path != "" {
			where = path
		}
		return fmt.Errorf("%s: field number %d is not one this release knows (a newer client's?): leave it out, or upgrade the managers first", where, num)
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		name := string(fd.Name())
		if path != "" {
			name = path + "." + name
		}
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len() && err == nil; i++ {
				err = unknownFields(v.List().Get(i).Message(), fmt.Sprintf("%s[%d]", name, i))
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				err = unknownFields(mv.Message(), fmt.Sprintf("%s[%v]", name, k.Interface()))
				return err == nil
			})
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			err = unknownFields(v.Message(), name)
		}
		return err == nil
	})
	return err
}
