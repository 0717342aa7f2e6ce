package spec

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/curatorproject/curator/proto"
)

// EventMatch is an event filter (curator events --group, --node, --kind,
// --since) ready to match: what its node query and its group mean among
// the nodes known when it was made. An event matches when every field set
// does:
//
//	field | an event matches when
//	group | its group is it; or it has none and its node is in it now
//	node  | its node's ID is it or starts with it, its node_name is it,
//	      | or its node is the one so named now
//	kind  | its action or its loop is it, in any case
//	since | it was recorded at or after it
type EventMatch struct {
	f       *pb.EventFilter
	since   time.Time
	named   map[string]bool
	inGroup map[string]bool
}

// NewEventMatch is the match of filter f (nil: every event), the nodes
// known now being known.
func NewEventMatch(f *pb.EventFilter, known []*pb.Node) *EventMatch {
	m := &EventMatch{f: f, named: map[string]bool{}, inGroup: map[string]bool{}}
	if f == nil {
		return m
	}
	if f.Since != nil {
		m.since = f.Since.AsTime()
	}
	for _, n := range known {
		if f.Node != "" && n.Name == f.Node {
			m.named[n.Id] = true
		}
		if f.Group != "" && n.Group == f.Group {
			m.inGroup[n.Id] = true
		}
	}
	return m
}

// All says whether the filter selects every event.
func (m *EventMatch) All() bool {
	return m.f == nil || proto.Equal(m.f, &pb.EventFilter{})
}

// Match says whether event e passes the filter.
func (m *EventMatch) Match(e *pb.Event) bool {
	f := m.f
	if f == nil {
		return true
	}
	if f.Group != "" && e.Group != f.Group && (e.Group != "" || !m.inGroup[e.NodeId]) {
		return false
	}
	if f.Node != "" && !(e.NodeId != "" && strings.HasPrefix(e.NodeId, f.Node)) && e.NodeName != f.Node && !m.named[e.NodeId] {
		return false
	}
	if f.Kind != "" && !strings.EqualFold(e.Action, f.Kind) && !strings.EqualFold(e.Loop, f.Kind) {
		return false
	}
	if !m.since.IsZero() && e.Time.AsTime().Before(m.since) {
		return false
	}
	return true
}

// checkEventFilter refuses a filter no event could be meant by: a name
// too long to be one, or a time that is none.
func checkEventFilter(f *pb.EventFilter) error {
	if f == nil {
		return nil
	}
	for _, v := range []struct{ name, value string }{{"group", f.Group}, {"node", f.Node}, {"kind", f.Kind}} {
		if len(v.value) > 2*MaxNameLength {
			return fmt.Errorf("%w: event filter %s %s is longer than any %s", ErrInvalid, v.name, QuoteShort(v.value), v.name)
		}
	}
	if f.Since != nil {
		if err := f.Since.CheckValid(); err != nil {
			return fmt.Errorf("%w: event filter since: %v", ErrInvalid, err)
		}
	}
	return nil
}
