package curator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/curator/internal/leader"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

// auditTimeout bounds the write of an audit entry, which goes on when
// the caller has gone.
const auditTimeout = 5 * time.Second

// A refused call changed nothing, so it is answered at once and its
// entry written after (runRefusalLog): a caller is never kept waiting on
// etcd to be told no. At most refusalQueue entries wait; each is tried
// for refusalBound (etcd may be electing, or this member cut off).
const (
	refusalQueue = 1024
	refusalBound = 30 * time.Second
)

// audit records a management call that ended with err (nil: it
// succeeded) if it is one the trail keeps: a call above the reader role,
// or any refused call (PermissionDenied). A failure to record is logged:
// the call has been answered already.
func (s *Service) audit(ctx context.Context, id identity, method string, req any, err error) {
	s.auditOn(ctx, id, method, req, nil, err)
}

// auditRefusal records a call refused before it ran (not authenticated,
// not allowed, or invalid), in the background: see runRefusalLog.
func (s *Service) auditRefusal(ctx context.Context, id identity, method string, req any, err error) {
	e := s.auditEntry(id, method, req, "", err)
	if e == nil {
		return
	}
	select {
	case s.refusals <- e:
	default:
		s.metrics.RefusalsUnaudited.Inc()
		s.logger(ctx).Warn("too many refused calls waiting for the audit trail: not recorded", zap.String("call", e.Call), zap.String("caller", e.Name))
	}
}

// runRefusalLog writes the entries of refused calls, oldest first, each
// tried again until refusalBound has passed. A plain put of a new key
// (no fence): a refusal is the answering manager's record, whoever leads.
// Once ctx ends, what waits is written within a second, or lost.
func (s *Service) runRefusalLog(ctx context.Context) error {
	supervisor.Signal(ctx, supervisor.Healthy)
	write := func(ctx context.Context, e *pb.AuditEntry) {
		var err error
		for try := 0; ; try++ {
			wctx, cancel := context.WithTimeout(ctx, auditTimeout)
			err = store.AuditRecord(wctx, s.cfg.Etcd, nil, e)
			cancel()
			if err == nil || s.cfg.Now().Sub(e.Time.AsTime()) > refusalBound ||
				supervisor.Sleep(ctx, time.Duration(try+1)*100*time.Millisecond) != nil {
				break
			}
		}
		if err != nil {
			s.metrics.RefusalsUnaudited.Inc()
			s.logger(ctx).Warn("could not record a refused call in the audit trail", zap.String("call", e.Call), zap.String("caller", e.Name), zap.Error(err))
		}
	}
	for {
		select {
		case e := <-s.refusals:
			write(ctx, e)
		case <-ctx.Done():
			flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			defer cancel()
			for {
				select {
				case e := <-s.refusals:
					write(flush, e)
				default:
					return ctx.Err()
				}
			}
		}
	}
}

// auditOn is audit of a call on node on (nil: none or not known), as
// its record was before the call. A change the leader made is also an event (loop "operator",
// with its actor), so that `events` shows the operators' actions beside
// the loops'.
func (s *Service) auditOn(ctx context.Context, id identity, method string, req any, on *pb.Node, err error) {
	nodeID := on.GetId()
	e := s.auditEntry(id, method, req, nodeID, err)
	if e == nil {
		return
	}
	e.Changes = auditNoted(ctx)
	st := s.currentLeader()
	var l *store.Fence
	if st != nil {
		l = st.Lead.Fence
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditTimeout)
	defer cancel()
	if rerr := store.AuditRecord(ctx, s.cfg.Etcd, l, e); rerr != nil {
		s.logger(ctx).Warn("could not record a management call in the audit trail", zap.String("call", e.Call), zap.Error(rerr))
	}
	if st == nil || err != nil || !spec.Changes(e.Call) {
		return
	}
	reason := e.Args
	if reason == "" {
		reason = "(no arguments)"
	}
	if e.Changes != "" {
		reason += "; set " + e.Changes
	}
	ev := &pb.Event{Time: e.Time, Loop: "operator", NodeId: nodeID, Action: e.Call, Reason: reason,
		Leader: s.cfg.NodeID, Term: st.Lead.Rev(), Actor: e.Name + " (" + e.Role + ")"}
	ev.NodeName, ev.Group = on.GetName(), on.GetGroup()
	if rerr := store.EventRecord(ctx, st.Lead.Fence, ev); rerr != nil {
		s.logger(ctx).Warn("could not record an operator's call as an event", zap.String("call", e.Call), zap.Error(rerr))
	}
}

// auditEntry is the entry of a management call that ended with err, made
// now by this manager; nil if the trail does not keep the call.
func (s *Service) auditEntry(id identity, method string, req any, nodeID string, err error) *pb.AuditEntry {
	call := strings.TrimPrefix(method, managementPrefix)
	if status.Code(err) != codes.PermissionDenied && !spec.Audited(call) {
		return nil
	}
	e := auditEntry(id, call, req, err)
	e.Time = timestamppb.New(s.cfg.Now())
	e.Recorder = s.cfg.NodeID
	e.NodeId = nodeID
	return e
}

// auditNode is the node a request names (its "id" field: an ID, a
// prefix or a name), as the registry resolves it now; nil when it names
// none.
func auditNode(st *leader.State, req any) *pb.Node {
	m, ok := req.(proto.Message)
	if !ok || m == nil {
		return nil
	}
	r := m.ProtoReflect()
	fd := r.Descriptor().Fields().ByName("id")
	if fd == nil || fd.Kind() != protoreflect.StringKind || !r.Has(fd) {
		return nil
	}
	n, err := store.NodeResolve(st.Reg.Nodes(), r.Get(fd).String())
	if err != nil {
		return nil
	}
	return n
}

// auditEntry describes a call: who, from where, what, on what and how it
// ended. Pure: TestAuditEntryHoldsNoSecret feeds it every request type.
func auditEntry(id identity, call string, req any, err error) *pb.AuditEntry {
	e := &pb.AuditEntry{Name: id.name, Role: id.opRole, Serial: id.serial, Peer: id.peer, Call: call, Outcome: "ok"}
	switch {
	case id.role == "":
		e.Name = "anonymous"
	case id.role != "admin":
		e.Name, e.Role = id.String(), id.role
	}
	if m, ok := req.(proto.Message); ok && m != nil {
		e.Args, e.Target = auditArgs(m.ProtoReflect())
	}
	if err != nil {
		st := status.Convert(err)
		e.Outcome = st.Code().String() + ": " + cutShort(st.Message(), 300)
	}
	return e
}

// auditTargets are the request fields that name what a call is on, in the
// order they are looked for.
var auditTargets = []protoreflect.Name{"id", "name", "group", "role", "cert"}

// auditArgs is a request in short, "key=value" for each field set, and
// its target. Only scalars are shown: bytes (keys, certificates) never,
// and a message (a group spec, which may hold a provider's credentials)
// by its name alone, so no secret a request can carry reaches the trail.
func auditArgs(m protoreflect.Message) (args, target string) {
	var parts []string
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if !m.Has(fd) {
			continue
		}
		v := m.Get(fd)
		var text string
		switch {
		case fd.IsMap():
			keys := []string{}
			v.Map().Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
				keys = append(keys, k.String())
				return true
			})
			slices.Sort(keys)
			text = "{" + cutShort(strings.Join(keys, ","), 100) + "}"
		case fd.IsList():
			if fd.Kind() == protoreflect.StringKind {
				var items []string
				for j := 0; j < v.List().Len(); j++ {
					items = append(items, v.List().Get(j).String())
				}
				text = "[" + cutShort(strings.Join(items, ","), 100) + "]"
			} else {
				text = fmt.Sprintf("[%d]", v.List().Len())
			}
		case fd.Kind() == protoreflect.BytesKind:
			continue
		case fd.Kind() == protoreflect.MessageKind:
			sub := v.Message()
			if name := sub.Descriptor().Fields().ByName("name"); name != nil && name.Kind() == protoreflect.StringKind && target == "" {
				target = cutShort(sub.Get(name).String(), 64)
			}
			switch sub.Interface().(type) {
			case interface{ AsDuration() time.Duration }:
				text = sub.Interface().(interface{ AsDuration() time.Duration }).AsDuration().String()
			default:
				text = "{" + string(sub.Descriptor().Name()) + "}"
			}
		case fd.Kind() == protoreflect.EnumKind:
			if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
				text = string(ev.Name())
			} else {
				text = fmt.Sprint(v.Enum())
			}
		default:
			text = cutShort(v.String(), 64)
		}
		parts = append(parts, string(fd.Name())+"="+text)
	}
	for _, name := range auditTargets {
		if fd := fields.ByName(name); fd != nil && fd.Kind() == protoreflect.StringKind && m.Has(fd) {
			target = cutShort(m.Get(fd).String(), 64)
			break
		}
	}
	return strings.Join(parts, " "), target
}

// cutShort cuts s to at most n bytes, on a rune boundary, marking the cut.
func cutShort(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n] + "..."
}
