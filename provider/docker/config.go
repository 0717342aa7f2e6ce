package docker

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/moby/moby/client"
	"go.uber.org/zap"
)

// The defaults of Config.
const (
	// DefaultNetwork is the Docker network the containers join.
	DefaultNetwork = "curator"
	// DefaultSubnet is the network's subnet; the provider hands out its
	// addresses from the first one after the gateway.
	DefaultSubnet = "172.30.0.0/24"
	// DefaultImage is the image the containers run: the one `make image`
	// builds.
	DefaultImage = "curator:dev"
	// DefaultPort is the port every node listens on; each container has
	// an IP of its own, so they all use the same one.
	DefaultPort = 7000
	// DefaultDataDir is the node's data dir inside the container (a volume
	// of the image).
	DefaultDataDir = "/var/lib/curator"
	// DefaultStopTimeout is how long Destroy lets a node stop after
	// SIGTERM before Docker kills it.
	DefaultStopTimeout = 10 * time.Second
	// DefaultPruneGrace is how old a container that was created and never
	// started must be before Prune removes it: younger, it may be a
	// Provision in progress.
	DefaultPruneGrace = time.Minute
	// DefaultListTimeout is how long List waits for one engine of
	// several before it says that engine's domain is unreachable.
	DefaultListTimeout = 5 * time.Second
)

// Config is the provider's configuration. Zero fields take the defaults
// above (withDefaults).
type Config struct {
	// Host is the Docker daemon's address; default $DOCKER_HOST, else the
	// local socket. The other DOCKER_* variables (TLS, API version) are
	// read as the docker CLI reads them.
	Host string
	// Network is the name of the bridge network the containers join; it
	// is created, with Subnet, if missing. It is also the provider's
	// scope: a Provider sees only the containers it made on its network.
	Network string
	// Subnet is the network's IPv4 subnet, CIDR. An existing network must
	// have it.
	Subnet string
	// Image is the image to run; its entry point is the curator binary
	// (BuildImage makes one).
	Image string
	// Port is the port every node listens on ({{address}} is IP:Port);
	// the node also uses Port+1..Port+3.
	Port int
	// DataDir is the node's data dir inside the container ({{data-dir}}).
	DataDir string
	// HostDir, if set, holds each container's data dir on the host, as
	// HostDir/<id> bind-mounted at DataDir, so the host can read what the
	// node writes (the admin config of `agent init`); the node then runs
	// as the provider's uid and gid. If empty the data dir is a volume of
	// the container, removed with it, and the node runs as root (of the
	// container: the image has no other user).
	HostDir string
	// ManagerSocket, if set, is the host path of the Docker daemon's unix
	// socket, mounted into the containers of Spec.Manager machines (with
	// DOCKER_HOST pointing at it) so that their curator, as leader, can
	// run the docker provider too. Default: the path of Host when Host is
	// a unix socket.
	ManagerSocket string
	// StopTimeout is how long Destroy waits after SIGTERM before Docker
	// sends SIGKILL (rounded up to whole seconds).
	StopTimeout time.Duration
	// PruneGrace is how old a created, never started container must be
	// before Prune takes it for the leftover of a crashed Provision.
	PruneGrace time.Duration
	// Now is the clock Prune measures PruneGrace with; default time.Now.
	Now func() time.Time
	// Logger records what the provider does; default a no-op logger.
	Logger *zap.Logger
	// Engines, for NewEngines, are the Docker engines to make machines
	// on, by failure domain (Host and Subnet above are then unused).
	Engines map[string]Engine
	// ListTimeout bounds how long NewEngines' List waits for one engine
	// before it takes that engine's domain for unreachable.
	ListTimeout time.Duration
}

// Engine is one Docker engine of Config.Engines, a failure domain.
type Engine struct {
	// Host is the engine's address (unix:///path or tcp://host:port).
	Host string
	// Subnet is the network's subnet on this engine: each engine's own,
	// the hosts routing between them.
	Subnet string
}

// withDefaults returns c with its zero fields filled in and HostDir made
// absolute (Docker binds absolute paths only).
func (c Config) withDefaults() (Config, error) {
	c.Host = cmp.Or(c.Host, os.Getenv(client.EnvOverrideHost), client.DefaultDockerHost)
	if c.ManagerSocket == "" {
		if path, ok := strings.CutPrefix(c.Host, "unix://"); ok {
			c.ManagerSocket = path
		}
	}
	c.Network = cmp.Or(c.Network, DefaultNetwork)
	c.Subnet = cmp.Or(c.Subnet, DefaultSubnet)
	c.Image = cmp.Or(c.Image, DefaultImage)
	c.Port = cmp.Or(c.Port, DefaultPort)
	c.DataDir = cmp.Or(c.DataDir, DefaultDataDir)
	c.StopTimeout = cmp.Or(c.StopTimeout, DefaultStopTimeout)
	c.PruneGrace = cmp.Or(c.PruneGrace, DefaultPruneGrace)
	c.ListTimeout = cmp.Or(c.ListTimeout, DefaultListTimeout)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.HostDir != "" {
		abs, err := filepath.Abs(c.HostDir)
		if err != nil {
			return c, fmt.Errorf("host dir %q: %w", c.HostDir, err)
		}
		c.HostDir = abs
	}
	return c, nil
}

// Validate says what is wrong with c, if anything. It expects the defaults
// filled in: an empty Network, Subnet or Image is an error here.
func (c Config) Validate() error {
	var errs []error
	if _, err := client.ParseHostURL(c.Host); err != nil {
		errs = append(errs, fmt.Errorf("docker host %q: %w", c.Host, err))
	}
	if err := validName(c.Network); err != nil {
		errs = append(errs, fmt.Errorf("network: %w", err))
	}
	if _, err := c.subnet(); err != nil {
		errs = append(errs, err)
	}
	if c.Image == "" {
		errs = append(errs, errors.New("image is required"))
	}
	if c.Port < 1 || c.Port > 65535-3 {
		errs = append(errs, fmt.Errorf("port %d is not in 1..%d (the node uses PORT+3 too)", c.Port, 65535-3))
	}
	if !path.IsAbs(c.DataDir) {
		errs = append(errs, fmt.Errorf("data dir %q: want an absolute path inside the container", c.DataDir))
	}
	if c.StopTimeout < 0 {
		errs = append(errs, fmt.Errorf("stop timeout %v is negative", c.StopTimeout))
	}
	if c.PruneGrace < 0 {
		errs = append(errs, fmt.Errorf("prune grace %v is negative", c.PruneGrace))
	}
	return errors.Join(errs...)
}

// subnet parses c.Subnet: an IPv4 CIDR with room for a gateway and at least
// one node, its host bits zero.
func (c Config) subnet() (netip.Prefix, error) {
	p, err := netip.ParsePrefix(c.Subnet)
	if err != nil {
		return p, fmt.Errorf("subnet %q: %w", c.Subnet, err)
	}
	if !p.Addr().Is4() {
		return p, fmt.Errorf("subnet %q: want an IPv4 subnet", c.Subnet)
	}
	if p != p.Masked() {
		return p, fmt.Errorf("subnet %q: host bits set; did you mean %s?", c.Subnet, p.Masked())
	}
	if p.Bits() > 29 {
		return p, fmt.Errorf("subnet %q: too small; want /29 or larger", c.Subnet)
	}
	return p, nil
}

// validName checks a Docker object name (a network's; containers are named
// after it): letters, digits, '_', '.', '-', starting with a letter or
// digit.
func validName(s string) error {
	if s == "" {
		return errors.New("name is empty")
	}
	if len(s) > 40 {
		return fmt.Errorf("name %q is longer than 40 characters", s)
	}
	for i, r := range s {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || r != '_' && r != '.' && r != '-') {
			return fmt.Errorf("name %q: want letters, digits, '_', '.' or '-', starting with a letter or digit", s)
		}
	}
	return nil
}
