package curator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/curator/decide"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

// Crash detection: a follower that sees the curator leader's process gone
// revokes the leader's election lease at once, rather than let every
// candidate wait out its TTL. "Gone" is a definitive sign, never a mere
// silence: the leader's gRPC port and its etcd client port (PORT+2, served
// by the same process) both refuse connections, and refuse them again a
// moment later. A host that answers with a refusal has no process on those
// ports: the common crash (killed, OOM, a panic). A frozen or cut-off
// leader refuses nothing, it is silent, and is bounded by the lease as
// before. A gRPC server that restarts for a moment inside a live process
// leaves etcd's port open, and is not taken for a crash.
//
// The other sign is a leader key of a past incarnation: a node killed and
// started again campaigns with a new key, while its old one, first in the
// line, is taken for the leader until its lease expires (and etcd extends
// every lease when it elects a leader of its own). Its ports answer (the
// new process), but the node holds a newer key in the election: a process
// holds one at a time, so the older is a dead one's.
//
// Revoking early is safe: every leader write is fenced on its election key,
// so a leader whose lease is revoked writes nothing more, whatever it
// believes (and a process that is gone believes nothing).

// Timings of the crash watch.
const (
	crashProbeEvery   = 100 * time.Millisecond
	crashProbeTimeout = 200 * time.Millisecond
	crashConfirmAfter = 20 * time.Millisecond
	// After this follower's connection to the leader was lost, the watch
	// looks again every crashRelookAfter, crashRelooks times, before it
	// keeps its period: a process killed resets its connections a moment
	// before its last listening socket closes.
	crashRelookAfter = 10 * time.Millisecond
	crashRelooks     = 10
)

// probe dials addr once.
func probe(ctx context.Context, addr string) decide.ProbeResult {
	d := net.Dialer{Timeout: crashProbeTimeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		conn.Close()
		return decide.ProbeOpen
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return decide.ProbeRefused
	}
	return decide.ProbeSilent
}

// etcdClientAddress is the etcd client address of a node at addr
// (IP:PORT+2).
func etcdClientAddress(addr string) (string, error) {
	ip, port, err := spec.SplitAddress(addr)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(port+2)), nil
}

// runCrashWatch probes the leader this curator follows and revokes its
// lease once its process is surely gone. It does nothing while this
// curator leads, or knows no leader. It probes every crashProbeEvery, and
// at once when this follower's own connection to the leader is lost
// (forwarder.watchConn), then every crashRelookAfter for a moment: a reset
// is a reason to look, never evidence by itself; the refusals decide,
// confirmed as ever.
func (s *Service) runCrashWatch(ctx context.Context) error {
	lg := supervisor.Logger(ctx)
	supervisor.Signal(ctx, supervisor.Healthy)
	dropped := s.fwd.drops()
	var suspect *leaderInfo
	every := cmp.Or(s.crashEvery, crashProbeEvery)
	relooks := 0
	for {
		wait := every
		if relooks > 0 {
			relooks--
			wait = crashRelookAfter
		}
		li := s.fwd.knownLeader()
		if li == nil || li.id == s.cfg.NodeID || s.currentLeader() != nil {
			suspect = nil
		} else {
			etcdAddr, err := etcdClientAddress(li.addr)
			if err != nil {
				suspect = nil
			} else {
				g, e := probe(ctx, li.addr), probe(ctx, etcdAddr)
				s.crashProbes.Add(1)
				same := suspect != nil && *suspect == *li
				newer := s.newerKeyOf(ctx, li)
				switch decide.Crash(g, e, same, li.lease != 0, newer) {
				case decide.CrashNone:
					suspect = nil
				case decide.CrashConfirm:
					suspect, wait = li, crashConfirmAfter
				case decide.CrashRevoke:
					suspect = nil
					evidence := fmt.Sprintf("the curator leader %s at %s is gone: its gRPC port and its etcd client port %s both refused connections twice, %v apart", li.id, li.addr, etcdAddr, crashConfirmAfter)
					if newer {
						evidence = fmt.Sprintf("the curator leader's key (node %s, revision %d) is a past incarnation's: the node campaigns with a newer key", li.id, li.rev)
					}
					rctx, cancel := context.WithTimeout(ctx, time.Second)
					_, err := s.cfg.Etcd.Revoke(rctx, li.lease)
					cancel()
					if err != nil {
						lg.Warn("could not revoke a dead leader's election lease", zap.String("leader", li.id), zap.Error(err))
					} else {
						lg.Warn("revoked a dead leader's election lease", zap.String("leader", li.id), zap.String("evidence", evidence))
						s.recordRevoke(ctx, li.id, evidence)
					}
				}
			}
		}
		if suspect != nil {
			relooks = 0
		}
		woken, err := s.crashWait(ctx, wait, dropped, suspect != nil)
		if err != nil {
			return err
		}
		if woken {
			relooks = crashRelooks
		}
	}
}

// crashWait waits wait, or less: until this follower's connection to the
// leader is lost (dropped, and then woken), unless confirming a refusal
// already, whose pause holds.
func (s *Service) crashWait(ctx context.Context, wait time.Duration, dropped <-chan struct{}, confirming bool) (woken bool, err error) {
	t := time.NewTimer(wait)
	defer t.Stop()
	if confirming {
		dropped = nil
	}
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-t.C:
		return false, nil
	case <-dropped:
		return true, nil
	}
}

// recordRevoke keeps the event of a dead leader's lease revoked, with
// its evidence. The follower that revoked writes it itself, whoever leads
// next: it is the one event a curator that does not lead records (see
// eventObserved).
func (s *Service) recordRevoke(ctx context.Context, leader, evidence string) {
	ev := &pb.Event{
		Time: timestamppb.New(s.cfg.Now()), Loop: "election", NodeId: leader,
		Action: "revoke-dead-leader", Reason: evidence, Leader: s.cfg.NodeID,
	}
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := store.EventObserved(rctx, s.cfg.Etcd, ev); err != nil {
		supervisor.Logger(ctx).Warn("could not record the revoke of a dead leader's lease", zap.Error(err))
	}
}

// newerKeyOf says whether li's node holds an election key newer than li's
// (li's is then a past incarnation's).
func (s *Service) newerKeyOf(ctx context.Context, li *leaderInfo) bool {
	gctx, cancel := context.WithTimeout(ctx, crashProbeTimeout)
	defer cancel()
	return store.NodeHasNewerKey(gctx, s.cfg.Etcd, li.id, li.rev)
}
