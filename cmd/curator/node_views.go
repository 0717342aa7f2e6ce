package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// formatWide is node ls's -o wide: the table with more columns.
const formatWide outputFormat = "wide"

// wideOutput is node ls's -o: the formats every command has, and wide.
type wideOutput struct{ f *outputFormat }

func (o wideOutput) String() string { return o.f.String() }
func (o wideOutput) Type() string   { return "format" }

func (o wideOutput) Set(s string) error {
	if outputFormat(s) == formatWide {
		*o.f = formatWide
		return nil
	}
	if err := o.f.Set(s); err != nil {
		return fmt.Errorf("output format %q is not one of %s, %s", s, strings.Join(outputFormats, ", "), formatWide)
	}
	return nil
}

// wideHeader are the columns -o wide adds to node ls's table.
var wideHeader = []string{"GROUP", "INSTANCE", "DOMAIN", "CONFIG", "LAST HEARTBEAT", "STATUS SINCE", "CERT EXPIRES", "LABELS"}

// wideCells are node n's cells of wideHeader at now: times as how long
// ago (or, for the certificate, how long until), "-" where there is none.
func (n nodeJSON) wideCells(now time.Time) []string {
	return []string{
		orDash(n.Group), orDash(n.InstanceID), orDash(n.Domain), orDash(shortSHA(n.ConfigSHA)),
		ago(n.LastHeartbeat, now), ago(n.StatusChanged, now), until(n.CertExpires, now), orDash(labelList(n.Labels)),
	}
}

// writePrettyNode writes node n as `docker node inspect --pretty` does:
// a key and its value a line, times with how long ago (or until) at now.
// The keys of what n does not have (no group, no Swarm) are left out.
func writePrettyNode(w io.Writer, n nodeJSON, now time.Time) error {
	type kv struct{ k, v string }
	status := n.Status
	if n.StatusChanged != nil {
		status += " since " + stamp(n.StatusChanged, now)
	}
	lines := []kv{
		{"ID", n.ID}, {"Name", n.Name}, {"Address", n.Address}, {"State", n.stateCell()},
	}
	if n.Refused != "" {
		lines = append(lines, kv{"Refused", n.Refused})
	}
	lines = append(lines,
		kv{"Status", status}, kv{"Availability", n.Availability}, kv{"Roles", strings.Join(n.Roles, ", ")},
		kv{"Manager status", n.ManagerStatus},
	)
	if n.Demoting {
		lines = append(lines, kv{"Demoting", "yes"})
	}
	lines = append(lines, kv{"Version", n.Version})
	if n.Group != "" {
		lines = append(lines, kv{"Group", n.Group}, kv{"Instance", n.InstanceID})
		if n.Domain != "" {
			lines = append(lines, kv{"Domain", n.Domain})
		}
		lines = append(lines, kv{"Config SHA", n.ConfigSHA})
	}
	lines = append(lines,
		kv{"Labels", orDash(labelList(n.Labels))},
		kv{"Joined as", orDash(n.JoinedAs)},
		kv{"Last heartbeat", stamp(n.LastHeartbeat, now)},
		kv{"Created", stamp(n.Created, now)},
		kv{"Updated", stamp(n.Updated, now)},
		kv{"Certificate expires", stamp(n.CertExpires, now)},
	)
	if n.SwarmNodeID != "" || n.SwarmRole != "" || n.SwarmJoinRequested {
		lines = append(lines, kv{"Swarm node", orDash(n.SwarmNodeID)}, kv{"Swarm role", orDash(n.SwarmRole)}, kv{"Swarm state", orDash(n.SwarmState)})
	}
	width := 0
	for _, l := range lines {
		width = max(width, len(l.k))
	}
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%-*s  %s\n", width+1, l.k+":", tableCell(orDash(l.v)))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// labelList is labels as k=v, sorted by key, comma separated.
func labelList(labels map[string]string) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		out = append(out, k+"="+labels[k])
	}
	return strings.Join(out, ",")
}

// stamp is t in UTC with how long ago (or until) it is at now; "-" for
// none.
func stamp(t *time.Time, now time.Time) string {
	if t == nil {
		return "-"
	}
	rel := ago(t, now)
	if t.After(now) {
		rel = until(t, now)
	}
	return t.UTC().Format(time.RFC3339) + " (" + rel + ")"
}

// ago is how long before now t was: "3s ago", "5m ago", "2h ago", "4d
// ago"; "-" for none.
func ago(t *time.Time, now time.Time) string {
	if t == nil {
		return "-"
	}
	return span(now.Sub(*t)) + " ago"
}

// until is how long after now t is: "in 59d"; "expired" once past.
func until(t *time.Time, now time.Time) string {
	if t == nil {
		return "-"
	}
	d := t.Sub(now)
	if d <= 0 {
		return "expired " + span(-d) + " ago"
	}
	return "in " + span(d)
}

// span is d in its largest whole unit: seconds, minutes, hours or days.
func span(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int(d/time.Second), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}
