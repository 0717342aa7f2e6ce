//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package process

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"go.uber.org/zap"
)

// Config is the provider's configuration. Zero fields take the defaults of
// withDefaults.
type Config struct {
	// Dir holds the bookkeeping and the instances' data dirs. Required.
	Dir string
	// Binary is the curator binary to run; default the running executable.
	Binary string
	// Addresses is the pool of IP:PORT addresses to hand out, one per live
	// instance. A node also uses PORT+1..PORT+3 (docs/architecture.md), so addresses
	// that share an IP must be at least 4 ports apart; distinct loopback
	// IPs with one port are the usual pool.
	Addresses []string
	// Domains, instead of Addresses, are the pools of failure domains, by
	// name: a machine is made from the pool of the domain its spec names
	// and is in the domain whose pool holds its address, so its domain
	// needs no record and survives a restart of its leader. No address is
	// in two pools.
	Domains map[string][]string
	// StopTimeout is how long Destroy waits after SIGTERM before it sends
	// SIGKILL; default 10s.
	StopTimeout time.Duration
	// Logger records what the provider does; default a no-op logger.
	Logger *zap.Logger
	// StopWithParent ties the instances' lives to the process that starts
	// them: on Linux the kernel sends them SIGTERM when it dies (the
	// parent-death signal), so that `curator dev`, killed, leaves no node
	// running. A curator leader leaves it off: its instances must outlive
	// it. Elsewhere it has no effect.
	StopWithParent bool
}

// DefaultStopTimeout is Config.StopTimeout's default.
const DefaultStopTimeout = 10 * time.Second

// withDefaults returns c with its zero fields filled in and Dir made
// absolute, as the data dirs handed to the processes must not depend on
// their working directory.
func (c Config) withDefaults() (Config, error) {
	if c.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return c, fmt.Errorf("default binary: %w", err)
		}
		c.Binary = exe
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = DefaultStopTimeout
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Dir != "" {
		abs, err := filepath.Abs(c.Dir)
		if err != nil {
			return c, fmt.Errorf("dir %q: %w", c.Dir, err)
		}
		c.Dir = abs
	}
	return c, nil
}

// Validate says what is wrong with c, if anything.
func (c Config) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("dir is required"))
	}
	switch {
	case len(c.Addresses) > 0 && len(c.Domains) > 0:
		errs = append(errs, errors.New("addresses and domains: give one pool, or a pool per domain, not both"))
	case len(c.Addresses) == 0 && len(c.Domains) == 0:
		errs = append(errs, errors.New("addresses: the pool is empty; give at least one IP:PORT"))
	}
	errs = append(errs, validatePool("addresses", c.Addresses, map[string]string{})...)
	seen := map[string]string{} // address: its domain
	for _, d := range slices.Sorted(maps.Keys(c.Domains)) {
		if err := validateDomainName(d); err != nil {
			errs = append(errs, fmt.Errorf("domains: %w", err))
		}
		if len(c.Domains[d]) == 0 {
			errs = append(errs, fmt.Errorf("domains: domain %q: the pool is empty; give at least one IP:PORT", d))
		}
		errs = append(errs, validatePool(fmt.Sprintf("domains: domain %q", d), c.Domains[d], seen)...)
		for _, a := range c.Domains[d] {
			seen[a] = d
		}
	}
	if c.StopTimeout < 0 {
		errs = append(errs, fmt.Errorf("stop timeout %v is negative", c.StopTimeout))
	}
	return errors.Join(errs...)
}

// validatePool checks the addresses of one pool, what: each valid, and
// once in it and in the pools before, which seen maps to their domains.
func validatePool(what string, pool []string, seen map[string]string) []error {
	var errs []error
	here := make(map[string]bool, len(pool))
	for _, a := range pool {
		if err := validateAddress(a); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
			continue
		}
		if here[a] {
			errs = append(errs, fmt.Errorf("%s: %q is in the pool twice", what, a))
		} else if d, ok := seen[a]; ok {
			errs = append(errs, fmt.Errorf("%s: %q is in domain %q's pool too: a machine is in one domain", what, a, d))
		}
		here[a] = true
	}
	return errs
}

// validateAddress checks that a is a literal IP:PORT with a port a node can
// listen on (PORT+3 included).
func validateAddress(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("%q is not IP:PORT: %w", a, err)
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return fmt.Errorf("%q: %q is not an IP address", a, host)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535-3 {
		return fmt.Errorf("%q: port %q is not in 1..%d", a, port, 65535-3)
	}
	return nil
}

// CheckBinary says why the provider could not start binary on this host,
// if it could not: what a group's spec names is checked by the leader,
// which runs the provider, when it is committed, rather than found out by
// each machine that fails to start. Empty is the running executable.
func CheckBinary(binary string) error {
	if binary == "" {
		return nil
	}
	if !filepath.IsAbs(binary) {
		return fmt.Errorf("%q is not an absolute path", binary)
	}
	fi, err := os.Stat(binary)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%q does not exist on the leader's host", binary)
	case err != nil:
		return fmt.Errorf("%q: %w", binary, err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%q is not a regular file (%s) on the leader's host", binary, fi.Mode().Type())
	case fi.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("%q is not executable (mode %s) on the leader's host", binary, fi.Mode().Perm())
	}
	return nil
}
