//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package process

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/curatorproject/curator/internal/nodeport"
	"github.com/curatorproject/curator/provider"
)

// Provision starts one new instance of spec: it takes a free address from
// the pool (spec.Domain's, with Config.Domains), records the instance,
// and starts Binary with spec.Args (the placeholders replaced) and
// spec.Env added to this process's environment.
// The process runs in a session of its own and outlives the caller; its
// output goes to agent.log beside its record.
//
// Every call makes a new instance (see the package comment for why a spec
// cannot name one). The host-wide lock is held from the choice of address
// until the record holds the pid, so that no two Provisions hand out one
// address and Prune never takes a half-made instance for a dead one.
func (p *Provider) Provision(ctx context.Context, spec provider.Spec) (provider.Instance, error) {
	pool, err := p.pool(spec.Domain)
	if err != nil {
		return provider.Instance{}, fmt.Errorf("provision: %w", err)
	}
	unlock, err := p.lock(ctx)
	if err != nil {
		return provider.Instance{}, fmt.Errorf("provision: %w", err)
	}
	defer unlock()

	addr, err := p.freeAddress(pool)
	if err != nil && spec.Domain != "" {
		return provider.Instance{}, fmt.Errorf("provision in domain %s: %w", spec.Domain, err)
	}
	if err != nil {
		return provider.Instance{}, fmt.Errorf("provision: %w", err)
	}
	id, err := p.newInstanceDir()
	if err != nil {
		return provider.Instance{}, fmt.Errorf("provision: %w", err)
	}
	r := record{
		ID:      id,
		Labels:  maps.Clone(spec.Labels),
		Address: addr,
		Args:    provider.ExpandArgs(spec.Args, id, addr, p.DataDir(id)),
		Started: time.Now().UTC(),
	}
	r.Created = r.Started
	pid, err := p.start(r, spec.Env)
	if err != nil {
		p.recordDestroy(id)
		return provider.Instance{}, fmt.Errorf("provision %s: %w", id, err)
	}
	r.PID, r.StartTime = pid, startTime(pid)
	if err := p.recordSave(r); err != nil {
		// Without a record nobody could find the process again: stop it.
		syscall.Kill(-pid, syscall.SIGKILL)
		childReap(pid)
		p.recordDestroy(id)
		return provider.Instance{}, fmt.Errorf("provision %s: %w", id, err)
	}
	p.cfg.Logger.Info("provisioned instance",
		zap.String("id", id), zap.String("address", addr), zap.String("domain", p.domainOf[addr]), zap.Int("pid", pid),
		zap.Any("labels", r.Labels))
	return p.instance(r), nil
}

// freeAddress returns the first address of pool that no live, stopped
// or dead instance holds, and on whose port nothing listens. A dead
// instance keeps its address until its dir is cleared (ClearDead,
// Destroy): its node's certificate names it, and a restart brings the
// node back there. A crashed Provision's record holds none. An address on
// one of whose node ports another process of this host listens (another program, another provider's instance on the same
// pool, a killed instance whose threads are still on their way out) is
// skipped: a node made there would find its port taken and exit at once.
func (p *Provider) freeAddress(pool []string) (string, error) {
	ids, err := p.recordIDs()
	if err != nil {
		return "", err
	}
	used := make(map[string]bool)
	for _, id := range ids {
		r, err := p.recordLoad(id)
		if err != nil {
			continue // no record: no process either (see Provision)
		}
		if r.Stopped || r.PID > 0 {
			used[r.Address] = true
		}
	}
	var foreign []string
	for _, a := range pool {
		if used[a] {
			continue
		}
		if portTaken(a) {
			foreign = append(foreign, a)
			continue
		}
		if len(foreign) > 0 {
			p.cfg.Logger.Warn("skipped addresses some other process listens on", zap.Strings("addresses", foreign))
		}
		return a, nil
	}
	if len(foreign) > 0 {
		return "", fmt.Errorf("all %d addresses in use, %d of them (%s) by processes that are not this provider's: %w",
			len(pool), len(foreign), strings.Join(foreign, ", "), ErrPoolExhausted)
	}
	return "", fmt.Errorf("all %d addresses in use: %w", len(pool), ErrPoolExhausted)
}

// portTaken says whether some process listens on one of the node ports of
// addr (IP:PORT) already.
func portTaken(addr string) bool {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return false // the pool was validated: not reached
	}
	return errors.Is(nodeport.Check(ap.Addr().String(), int(ap.Port())), nodeport.ErrInUse)
}

// newInstanceDir creates the dir of a new instance, and its data dir, under
// a fresh random ID.
func (p *Provider) newInstanceDir() (string, error) {
	for range 10 {
		b := make([]byte, 4)
		rand.Read(b)
		id := "proc-" + hex.EncodeToString(b)
		err := os.Mkdir(p.instanceDir(id), 0o700)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		if err := os.Mkdir(p.DataDir(id), 0o700); err != nil {
			p.recordDestroy(id)
			return "", err
		}
		return id, nil
	}
	return "", errors.New("no free instance id after 10 tries")
}

// start writes r as a record with no pid yet (so that a crash from here on
// leaves a trace Prune can clean), then starts the process and returns its
// pid. Nothing waits for the process: the Go handle is released at once,
// and the pid is reaped by childReap when someone next looks at it.
func (p *Provider) start(r record, env map[string]string) (int, error) {
	if err := p.recordSave(r); err != nil {
		return 0, err
	}
	logf, err := os.OpenFile(p.LogFile(r.ID), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer logf.Close() // the child has its own copy
	// Not CommandContext: the process must outlive ctx, and the caller.
	cmd := exec.Command(p.cfg.Binary, r.Args...)
	cmd.Env = os.Environ()
	for _, k := range slices.Sorted(maps.Keys(env)) {
		cmd.Env = append(cmd.Env, k+"="+env[k]) // later entries win
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr(p.cfg.StopWithParent)
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	pid := cmd.Process.Pid
	childAdd(pid)
	cmd.Process.Release()
	return pid, nil
}
