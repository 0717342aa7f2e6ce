package curator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/curatorproject/curator/curator/spec"
	pb "github.com/curatorproject/curator/proto"
)

// What a call set, for its audit entry (AuditEntry.changes): a handler
// that writes a record notes, field by field, what it changes, and the
// interceptor puts that in the entry beside the request's short form. A
// refused call's note says what it tried.
//
// A value that may be a secret is never shown, only that it changed: the
// values of the template's environment (a machine's credentials go
// there), the value of a --token argument, and any provider setting not
// in auditShownProvider (a provider's credentials, when one has them).

// auditNote is where a handler leaves what its call set.
type auditNote struct{ changes string }

type auditNoteKey struct{}

// withAuditNote gives ctx a note for the handler to fill.
func withAuditNote(ctx context.Context) (context.Context, *auditNote) {
	n := &auditNote{}
	return context.WithValue(ctx, auditNoteKey{}, n), n
}

// noteChanges records what the call of ctx set (if it is audited).
func noteChanges(ctx context.Context, changes string) {
	if n, ok := ctx.Value(auditNoteKey{}).(*auditNote); ok {
		n.changes = changes
	}
}

// auditNoted is what the call of ctx noted it set.
func auditNoted(ctx context.Context) string {
	if n, ok := ctx.Value(auditNoteKey{}).(*auditNote); ok {
		return n.changes
	}
	return ""
}

// auditShownProvider are the provider settings whose values an audit
// entry shows: what a machine runs and where. Any other is shown as
// changed only.
var auditShownProvider = []protoreflect.Name{"addresses", "port", "dir", "binary", "network", "subnet", "image", "path"}

// maxAuditChanges bounds the changes of one entry (each value is cut
// shorter still).
const maxAuditChanges = 2000

// groupChanges says what a commit of spec to over spec from (nil: a new
// group) sets: "field: old -> new" for each field that changes, in the
// spec's order, "; " between them; a map field key by key ("+KEY",
// "-KEY", "~KEY" for a variable of the environment, whose values are
// never shown).
func groupChanges(from, to *pb.GroupSpec) string {
	return cutShort(strings.Join(groupChangeList(from, to), "; "), maxAuditChanges)
}

// groupChangeList is groupChanges one change at a time (a plan's).
func groupChangeList(from, to *pb.GroupSpec) []string {
	var out []string
	if from == nil {
		out = append(out, "a new group")
		from = &pb.GroupSpec{}
	}
	return append(out, messageChanges("", from.ProtoReflect(), to.ProtoReflect())...)
}

// messageChanges are the changes from f to t, two messages of one type,
// their fields' names after prefix.
func messageChanges(prefix string, f, t protoreflect.Message) []string {
	var out []string
	fields := f.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		fv, tv := f.Get(fd), t.Get(fd)
		if fv.Equal(tv) {
			continue
		}
		name := prefix + string(fd.Name())
		switch {
		case fd.IsMap():
			out = append(out, mapChanges(name, fv.Map(), tv.Map()))
		case fd.IsList():
			out = append(out, fmt.Sprintf("%s: %s -> %s", name, listText(name, fv.List(), fd), listText(name, tv.List(), fd)))
		case fd.Kind() == protoreflect.MessageKind && !isDuration(fd):
			fm, tm := fv.Message(), tv.Message()
			if fd.Name() == "provider" {
				out = append(out, providerChanges(name, fm, tm)...)
				continue
			}
			if r, ok := fm.Interface().(*pb.MachineRelease); ok {
				// The binary or image is the provider's change, said
				// there; what is new here is the content's digest.
				out = append(out, fmt.Sprintf("%s: %s -> %s", name, releaseText(r), releaseText(tm.Interface().(*pb.MachineRelease))))
				continue
			}
			out = append(out, messageChanges(name+".", fm, tm)...)
		default:
			out = append(out, fmt.Sprintf("%s: %s -> %s", name, valueText(fd, fv, f.Has(fd)), valueText(fd, tv, t.Has(fd))))
		}
	}
	return out
}

// providerChanges are the changes of a provider spec: its kind, then
// each setting, the ones not in auditShownProvider without their values.
func providerChanges(name string, f, t protoreflect.Message) []string {
	kind := f.Descriptor().Oneofs().ByName("kind")
	fk, tk := f.WhichOneof(kind), t.WhichOneof(kind)
	var out []string
	kindName := func(fd protoreflect.FieldDescriptor) string {
		if fd == nil {
			return "none"
		}
		return string(fd.Name())
	}
	if tk == nil {
		return []string{fmt.Sprintf("%s: %s -> none", name, kindName(fk))}
	}
	tm := t.Get(tk).Message()
	fm := tm.Type().Zero()
	if fk != nil && fk.Name() == tk.Name() {
		fm = f.Get(fk).Message()
	} else {
		out = append(out, fmt.Sprintf("%s: %s -> %s", name, kindName(fk), kindName(tk)))
	}
	prefix := name + "." + string(tk.Name()) + "."
	fields := tm.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		fv, tv := fm.Get(fd), tm.Get(fd)
		if fv.Equal(tv) {
			continue
		}
		if !slices.Contains(auditShownProvider, fd.Name()) || fd.IsList() || fd.IsMap() || fd.Kind() == protoreflect.MessageKind {
			out = append(out, prefix+string(fd.Name())+": changed (not shown)")
			continue
		}
		out = append(out, fmt.Sprintf("%s%s: %s -> %s", prefix, fd.Name(), valueText(fd, fv, true), valueText(fd, tv, true)))
	}
	return out
}

// mapChanges is a map field's changes key by key: "name: +k=v, -k, ~k=v"
// (the environment's: "+k, -k, ~k", its values never shown).
func mapChanges(name string, f, t protoreflect.Map) string {
	hide := name == "template.env"
	keys := map[string]bool{}
	for _, m := range []protoreflect.Map{f, t} {
		m.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
			keys[k.String()] = true
			return true
		})
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		mk := protoreflect.ValueOfString(k).MapKey()
		had, has := f.Has(mk), t.Has(mk)
		v := ""
		if has && !hide {
			v = "=" + spec.QuoteShort(t.Get(mk).String())
		}
		switch {
		case had && !has:
			parts = append(parts, "-"+spec.QuoteShort(k))
		case !had && has:
			parts = append(parts, "+"+spec.QuoteShort(k)+v)
		case !f.Get(mk).Equal(t.Get(mk)):
			parts = append(parts, "~"+spec.QuoteShort(k)+v)
		}
	}
	text := name + ": " + strings.Join(parts, ", ")
	if hide {
		text += " (values not shown)"
	}
	return text
}

// listText is a list field's value: strings quoted (a --token argument's
// value never shown), enums by name.
func listText(name string, l protoreflect.List, fd protoreflect.FieldDescriptor) string {
	var items []string
	hideNext := false
	for i := range l.Len() {
		v := l.Get(i)
		switch {
		case fd.Kind() == protoreflect.EnumKind:
			items = append(items, enumText(fd, v))
		case fd.Kind() == protoreflect.StringKind:
			s := v.String()
			switch {
			case hideNext:
				s, hideNext = "(not shown)", false
			case s == "--token" && name == "template.args":
				hideNext = true
			case strings.HasPrefix(s, "--token=") && name == "template.args":
				s = "--token=(not shown)"
			}
			items = append(items, spec.QuoteShort(s))
		default:
			items = append(items, fmt.Sprint(v.Interface()))
		}
	}
	return cutShort("["+strings.Join(items, " ")+"]", 300)
}

// valueText is a scalar's or a duration's value as an entry shows it
// ("unset" for a message not set).
func valueText(fd protoreflect.FieldDescriptor, v protoreflect.Value, set bool) string {
	switch {
	case isDuration(fd):
		if !set {
			return "unset"
		}
		m := v.Message()
		secs, nanos := m.Get(m.Descriptor().Fields().ByName("seconds")).Int(), m.Get(m.Descriptor().Fields().ByName("nanos")).Int()
		return (time.Duration(secs)*time.Second + time.Duration(nanos)).String()
	case fd.Kind() == protoreflect.EnumKind:
		return enumText(fd, v)
	case fd.Kind() == protoreflect.StringKind:
		return spec.QuoteShort(v.String())
	case fd.Kind() == protoreflect.BytesKind:
		return "(not shown)"
	}
	return fmt.Sprint(v.Interface())
}

func enumText(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
		return string(ev.Name())
	}
	return fmt.Sprint(v.Enum())
}

func isDuration(fd protoreflect.FieldDescriptor) bool {
	return fd.Kind() == protoreflect.MessageKind && fd.Message().FullName() == "google.protobuf.Duration"
}

// releaseText is a release's digest, short ("sha256:" and 12 hex), or
// "none" (a template committed before releases were recorded).
func releaseText(r *pb.MachineRelease) string {
	d := r.GetDigest()
	if d == "" {
		return "none"
	}
	return d[:min(len(d), len("sha256:")+12)]
}
