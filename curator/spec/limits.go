package spec

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/curatorproject/curator/proto"
)

// The limits of what one write may store (docs/architecture.md,
// "Limits"). The leader holds every node and group in memory, sends them
// to every `node ls` and every dashboard, and passes a template to each
// machine it makes; etcd refuses a request above 1.5 MiB with an error of
// its own. So each count and size is bounded where it comes in, with the
// limit named, and a whole record stays far below etcd's bound. They
// bound new writes only: a node or group stored before them loads and
// runs as it is, and a change to it must come within them (a node over
// MaxNodeLabels may still lose labels).
const (
	// MaxNodeLabels is the most labels one node carries: given at join
	// (--label), by `node update`, or by its group's template (labels
	// and --label args together). Each key and value is at most
	// MaxNameLength bytes (names.go).
	MaxNodeLabels = 64
	// MaxLabelRemovals bounds the label keys one `node update` removes.
	MaxLabelRemovals = 1024
	// MaxTemplateArgs and MaxTemplateEnv bound a group template's
	// `agent join` arguments and environment variables.
	MaxTemplateArgs = 256
	MaxTemplateEnv  = 128
	// MaxTemplateValue bounds one argument or one environment value.
	MaxTemplateValue = 4096
	// MaxTemplateVersion bounds a template's version, shown in tables.
	MaxTemplateVersion = 128
	// MaxTemplateBytes bounds a whole template: its version, labels,
	// args and environment, keys and values.
	MaxTemplateBytes = 64 << 10
	// MaxProviderValue bounds each text of a provider's settings (a
	// path, an image, a network).
	MaxProviderValue = 4096
)

// CheckText refuses text a machine cannot be started with, or a table
// cannot show: bytes that are not UTF-8, and control characters (a NUL
// ends a C string: an argument or environment entry holding one cannot
// be passed to a process at all; a newline or an escape forges a log
// line or a terminal). field names it in the error.
func CheckText(field, s string) error {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			return fmt.Errorf("%s: %s is not UTF-8 at byte %d", field, QuoteShort(s), i)
		case unicode.IsControl(r):
			return fmt.Errorf("%s: %s holds a control character (%U) at byte %d: a machine cannot be started with it", field, QuoteShort(s), r, i)
		}
		i += size
	}
	return nil
}

// checkNodeLabelCount refuses more labels on a node than MaxNodeLabels.
func checkNodeLabelCount(n int) error {
	if n > MaxNodeLabels {
		return fmt.Errorf("%d labels: a node carries at most %d (MaxNodeLabels)", n, MaxNodeLabels)
	}
	return nil
}

// CheckNodeLabels checks the labels a node is left with by a change from
// before labels: at most MaxNodeLabels, unless the change added none (a
// node stored with more before the limit may still lose some).
func CheckNodeLabels(node string, before, after map[string]string) error {
	added := false
	for k := range after {
		if _, had := before[k]; !had {
			added = true
		}
	}
	if !added {
		return nil
	}
	if err := checkNodeLabelCount(len(after)); err != nil {
		return fmt.Errorf("%w: node %s would carry %v: remove some first", ErrInvalid, node, err)
	}
	return nil
}

// validateGroupValues checks what a provider is handed of a spec: every
// text free of control characters, each count and size within its limit
// (the constants above), each --label argument a label. The errors name
// the field and the limit or the reason.
func validateGroupValues(s *pb.GroupSpec) []error {
	var errs []error
	if p := s.GetProvider(); p != nil {
		errs = append(errs, validateProviderValues(p.ProtoReflect())...)
	}
	for _, k := range slices.Sorted(maps.Keys(s.GetProvider().GetPlugin().GetConfig())) {
		field := "provider.plugin.config." + k
		if v := s.Provider.GetPlugin().Config[k]; len(k)+len(v) > MaxProviderValue {
			errs = append(errs, fmt.Errorf("%s: %d bytes, at most %d (MaxProviderValue)", field, len(k)+len(v), MaxProviderValue))
		} else if err := CheckText(field, v); err != nil {
			errs = append(errs, err)
		}
	}
	if n := len(s.GetProvider().GetPlugin().GetConfig()); n > MaxTemplateEnv {
		errs = append(errs, fmt.Errorf("provider.plugin.config: %d settings, at most %d (MaxTemplateEnv)", n, MaxTemplateEnv))
	}
	if b := s.GetProvider().GetProcess().GetBinary(); b != "" && !filepath.IsAbs(b) {
		errs = append(errs, fmt.Errorf("provider.process.binary: want an absolute path (or none: the leader's own binary), got %s", QuoteShort(b)))
	}
	t := s.GetTemplate()
	if t == nil {
		return errs
	}
	if len(t.Version) > MaxTemplateVersion {
		errs = append(errs, fmt.Errorf("template.version: %d bytes, at most %d (MaxTemplateVersion)", len(t.Version), MaxTemplateVersion))
	} else if err := CheckText("template.version", t.Version); err != nil {
		errs = append(errs, err)
	}
	total := len(t.Version)
	if len(t.Args) > MaxTemplateArgs {
		errs = append(errs, fmt.Errorf("template.args: %d arguments, at most %d (MaxTemplateArgs)", len(t.Args), MaxTemplateArgs))
	}
	for i, a := range t.Args {
		total += len(a)
		field := fmt.Sprintf("template.args[%d]", i)
		if len(a) > MaxTemplateValue {
			errs = append(errs, fmt.Errorf("%s: %d bytes, at most %d (MaxTemplateValue)", field, len(a), MaxTemplateValue))
		} else if err := CheckText(field, a); err != nil {
			errs = append(errs, err)
		}
	}
	if len(t.Env) > MaxTemplateEnv {
		errs = append(errs, fmt.Errorf("template.env: %d variables, at most %d (MaxTemplateEnv)", len(t.Env), MaxTemplateEnv))
	}
	for _, k := range slices.Sorted(maps.Keys(t.Env)) {
		v := t.Env[k]
		total += len(k) + len(v)
		field := "template.env." + k
		if len(v) > MaxTemplateValue {
			errs = append(errs, fmt.Errorf("%s: %d bytes, at most %d (MaxTemplateValue)", field, len(v), MaxTemplateValue))
		} else if err := CheckText(field, v); err != nil {
			errs = append(errs, err)
		}
	}
	for k, v := range t.Labels {
		total += len(k) + len(v)
	}
	labels := len(t.Labels)
	for _, a := range parseAgentArgs(t.Args) {
		if a.flag != "" && !a.valued {
			errs = append(errs, fmt.Errorf("template.args: --%s wants a value after it", a.flag))
		}
		if a.flag != "label" || !a.valued {
			continue
		}
		k, v, ok := strings.Cut(a.value, "=")
		if !ok {
			errs = append(errs, fmt.Errorf("template.args: --label %s: give a label as KEY=VALUE", QuoteShort(a.value)))
			continue
		}
		if err := ValidateLabel(k, v); err != nil {
			errs = append(errs, fmt.Errorf("template.args: --label: %w", err))
		}
		if _, dup := t.Labels[k]; !dup {
			labels++
		}
	}
	if err := checkNodeLabelCount(labels); err != nil {
		errs = append(errs, fmt.Errorf("template.labels and --label args: %w", err))
	}
	if total > MaxTemplateBytes {
		errs = append(errs, fmt.Errorf("template: %d bytes of version, labels, args and env, at most %d (MaxTemplateBytes)", total, MaxTemplateBytes))
	}
	return errs
}

// validateProviderValues checks every text of a provider's settings,
// whichever provider and field: a field added later is checked too.
func validateProviderValues(p protoreflect.Message) []error {
	var errs []error
	p.Range(func(kind protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if kind.Kind() != protoreflect.MessageKind {
			return true
		}
		v.Message().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			if fd.Kind() != protoreflect.StringKind || fd.IsList() || fd.IsMap() {
				return true
			}
			field := "provider." + string(kind.Name()) + "." + string(fd.Name())
			if s := v.String(); len(s) > MaxProviderValue {
				errs = append(errs, fmt.Errorf("%s: %d bytes, at most %d (MaxProviderValue)", field, len(s), MaxProviderValue))
			} else if err := CheckText(field, s); err != nil {
				errs = append(errs, err)
			}
			return true
		})
		return true
	})
	return errs
}
