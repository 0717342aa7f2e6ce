package curator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/pki"
	"github.com/curatorproject/curator/supervisor"
)

// A revoked operator certificate is refused at its next call (admit reads
// its record), and what it has open ends too. Every management call of an
// operator certificate, stream or not, is registered here by serial with
// its context's cancel function, from the interceptor that admitted it
// until it returns.
//
// Each manager watches the admin-certs prefix of its own etcd member
// (runRevocationWatch) and cancels a certificate's calls the moment its
// member applies the revocation: a forwarded stream ends at the follower
// that holds the client's connection and at the leader that serves it.
//
// The watch may lag the data by a moment, so a stream the leader serves
// also reads the record before each answer (sendCheck), from the member
// the answer's data came from and after it: an answer that holds anything
// written after the revocation finds it, and the stream ends unsent.

// revokedError is what a call made with a revoked certificate is told.
type revokedError struct{ serial, name string }

func (e *revokedError) Error() string {
	return fmt.Sprintf("%v: certificate %s (%s) was revoked: its open calls and streams end, and every manager refuses it", spec.ErrDenied, e.serial, e.name)
}

func (e *revokedError) Unwrap() error { return spec.ErrDenied }

// revokedCause is the revocation that cancelled ctx, or nil.
func revokedCause(ctx context.Context) error {
	var re *revokedError
	if errors.As(context.Cause(ctx), &re) {
		return re
	}
	return nil
}

// openCalls are the management calls in progress, by certificate serial,
// and the serials the watch has seen revoked.
type openCalls struct {
	mu    sync.Mutex
	next  int
	calls map[string]map[int]openCall
	// revoked are the serials whose records say revoked, as the watch
	// last saw them.
	revoked map[string]bool
}

// openCall is a call in progress: the name its certificate holds, and
// the cancel function of its context.
type openCall struct {
	name   string
	cancel context.CancelCauseFunc
}

func newOpenCalls() *openCalls {
	return &openCalls{calls: map[string]map[int]openCall{}, revoked: map[string]bool{}}
}

// open registers a call of id: it returns the context the call runs
// under, cancelled with a *revokedError once id's certificate is revoked,
// and release, to call when the call returns. A certificate already known
// revoked is refused. Calls of node certificates, and of an admin
// certificate without a serial, are not registered.
func (o *openCalls) open(ctx context.Context, id identity) (context.Context, func(), error) {
	if id.role != pki.RoleAdmin || id.serial == "" {
		return ctx, func() {}, nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.revoked[id.serial] {
		return ctx, func() {}, &revokedError{serial: id.serial, name: id.name}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	o.next++
	key := o.next
	if o.calls[id.serial] == nil {
		o.calls[id.serial] = map[int]openCall{}
	}
	o.calls[id.serial][key] = openCall{name: id.name, cancel: cancel}
	return ctx, func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		delete(o.calls[id.serial], key)
		if len(o.calls[id.serial]) == 0 {
			delete(o.calls, id.serial)
		}
		cancel(nil)
	}, nil
}

// set records the revocation state of serial, as its record says, and
// ends the open calls of a revoked one. It returns how many it ended.
func (o *openCalls) set(serial string, revoked bool) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !revoked {
		delete(o.revoked, serial)
		return 0
	}
	o.revoked[serial] = true
	n := 0
	for key, c := range o.calls[serial] {
		c.cancel(&revokedError{serial: serial, name: c.name})
		delete(o.calls[serial], key)
		n++
	}
	delete(o.calls, serial)
	return n
}

// forgetOthers forgets the revoked serials that are not listed.
func (o *openCalls) forgetOthers(listed map[string]bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for serial := range o.revoked {
		if !listed[serial] {
			delete(o.revoked, serial)
		}
	}
}

// count is how many calls are open.
func (o *openCalls) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, m := range o.calls {
		n += len(m)
	}
	return n
}

// revocationRetry is the wait before watching the admin certificates
// again after the watch failed.
const revocationRetry = 100 * time.Millisecond

// runRevocationWatch follows the admin certificates' records in this
// manager's own etcd member for as long as the curator runs, leader or
// not, and ends the open calls of each certificate revoked.
func (s *Service) runRevocationWatch(ctx context.Context) error {
	supervisor.Signal(ctx, supervisor.Healthy)
	for ctx.Err() == nil {
		err := s.watchRevocations(ctx)
		if ctx.Err() == nil {
			supervisor.Logger(ctx).Warn("watching the admin certificates stopped: watching them again", zap.Error(err))
		}
		if supervisor.Sleep(ctx, revocationRetry) != nil {
			break
		}
	}
	return ctx.Err()
}

// watchRevocations reads every record, then watches from the revision it
// read at, until the watch fails (a compaction, etcd gone) or ctx ends.
// Both are served by this manager's own member, without the leader
// (serializable): a manager cut off from the quorum still ends the calls
// of a revocation its member applied.
func (s *Service) watchRevocations(ctx context.Context) error {
	lg := supervisor.Logger(ctx)
	certs, rev, err := store.AdminCertListAt(ctx, s.cfg.Etcd)
	if err != nil {
		return err
	}
	listed := map[string]bool{}
	for _, c := range certs {
		listed[c.Serial] = true
		s.revokeCalls(lg, c.Serial, c.Name, c.Revoked)
	}
	// Records trimmed while no watch ran.
	s.calls.forgetOthers(listed)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for wr := range store.AdminCertWatch(wctx, s.cfg.Etcd, rev+1) {
		if err := wr.Err(); err != nil {
			return fmt.Errorf("watch admin certificates: %w", err)
		}
		for _, ev := range wr.Events {
			serial := store.AdminCertSerial(ev.Kv.Key)
			if ev.Type == clientv3.EventTypeDelete {
				// An expired record trimmed: TLS refuses the
				// certificate now.
				s.calls.set(serial, false)
				continue
			}
			c, err := store.AdminCertDecode(ev.Kv.Value)
			if err != nil {
				// A record we cannot read: end its calls rather than
				// let a revoked certificate through (admit refuses it
				// too).
				lg.Warn("an admin certificate record is corrupt: ending its calls", zap.String("serial", serial), zap.Error(err))
				s.revokeCalls(lg, serial, "", true)
				continue
			}
			s.revokeCalls(lg, serial, c.Name, c.Revoked)
		}
	}
	return errors.New("the admin certificates' watch ended")
}

func (s *Service) revokeCalls(lg *zap.Logger, serial, name string, revoked bool) {
	if n := s.calls.set(serial, revoked); n > 0 {
		lg.Info("ended the open calls of a revoked certificate", zap.String("serial", serial), zap.String("name", name), zap.Int("calls", n))
	}
}

// sendCheck reads, before an answer of a stream the leader serves, whether
// id's certificate is revoked now (see the top of this file). A record it
// cannot read ends the stream as Unavailable: the client opens it again,
// and is admitted or refused afresh.
func (s *Service) sendCheck(ctx context.Context, id identity) func() error {
	return func() error {
		if err := revokedCause(ctx); err != nil {
			return err
		}
		revoked, err := store.AdminCertRevoked(ctx, s.cfg.Etcd, id.serial)
		if revoked {
			return &revokedError{serial: id.serial, name: id.name}
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return status.Errorf(codes.Unavailable, "could not check whether certificate %s was revoked: %v", id.serial, err)
		}
		return nil
	}
}
