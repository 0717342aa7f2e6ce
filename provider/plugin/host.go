package plugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/provider"
)

// The defaults of Config.
const (
	DefaultTimeout    = time.Minute
	DefaultMinBackoff = time.Second
	DefaultMaxBackoff = time.Minute
)

// ConfigTimeout is the key of a plugin's config that the leader reads
// itself (and hands on with the rest): Config.Timeout, as a Go duration
// ("30s", "5m").
const ConfigTimeout = "timeout"

// Config is how the leader runs one plugin.
type Config struct {
	// Path is the plugin's executable, an absolute path. Required.
	Path string
	// Config is handed to the plugin's Configure as it is.
	Config map[string]string
	// Timeout bounds each call (a Provision that makes a VM included): a
	// plugin that has not answered by then is taken for hung, killed and
	// started again. Default DefaultTimeout.
	Timeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before a plugin that
	// exited or hung is started again: the first wait is MinBackoff, each
	// failure in a row doubles it up to MaxBackoff, and a call that
	// succeeds resets it.
	MinBackoff, MaxBackoff time.Duration
	// Logger gets what the plugin writes to stderr, and why it was
	// stopped; default none.
	Logger *zap.Logger
}

// ConfigFor is the Config of a group's provider.plugin settings: path,
// and config with its timeout read (CheckConfig says what is wrong).
func ConfigFor(path string, config map[string]string) (Config, error) {
	c := Config{Path: path, Config: config}
	if err := CheckConfig(config); err != nil {
		return c, err
	}
	if t, ok := config[ConfigTimeout]; ok {
		c.Timeout, _ = time.ParseDuration(t)
	}
	return c, nil
}

// configKey is what a key of a plugin's config may be: a plugin may make
// an environment variable's name of it (the exec plugin does).
var configKey = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`)

// CheckConfig says what is wrong with a plugin's config, if anything,
// field by field: a key that is not a letter then letters, digits, -
// and _, or a timeout that is not a positive duration.
func CheckConfig(config map[string]string) error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(config)) {
		if !configKey.MatchString(k) {
			errs = append(errs, fmt.Errorf("config: key %q: want a letter, then letters, digits, - and _", k))
		}
	}
	if t, ok := config[ConfigTimeout]; ok {
		if d, err := time.ParseDuration(t); err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("config.%s: want a positive duration such as 30s or 5m, got %q", ConfigTimeout, t))
		}
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MinBackoff == 0 {
		c.MinBackoff = DefaultMinBackoff
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

// Validate says what is wrong with c, if anything.
func (c Config) Validate() error {
	var errs []error
	if c.Path == "" {
		errs = append(errs, errors.New("path is required"))
	} else if !strings.HasPrefix(c.Path, "/") {
		errs = append(errs, fmt.Errorf("path %q is not absolute", c.Path))
	}
	if c.Timeout < 0 || c.MinBackoff < 0 || c.MaxBackoff < c.MinBackoff {
		errs = append(errs, fmt.Errorf("timeout %v, backoff %v to %v: want them positive, the least first", c.Timeout, c.MinBackoff, c.MaxBackoff))
	}
	return errors.Join(errs...)
}

// Provider is a provider plugin as the leader uses it. Its methods may be
// called concurrently: they share one plugin process, started by the
// first call that needs it.
type Provider struct {
	cfg Config

	mu     sync.Mutex
	cur    *conn // nil: not running
	closed bool
	// down is why the last process was stopped, nil once a call
	// succeeds; no process is started before retryAt.
	down    error
	retryAt time.Time
	// wait is the backoff before retryAt; backoff the next one.
	wait, backoff time.Duration
	// kills are the stopped processes' Kills under way (Close waits).
	kills sync.WaitGroup
}

var (
	_ provider.Provider  = (*Provider)(nil)
	_ provider.LastWords = (*Provider)(nil)
	_ provider.Runner    = (*Provider)(nil)
)

// conn is one run of the plugin's process.
type conn struct {
	client *goplugin.Client
	rpc    pb.ProviderPluginClient
	stderr *lastLine
	// stopped is set (under Provider.mu) once it is killed.
	stopped bool
}

// ErrClosed is returned by the calls of a Provider after Close.
var ErrClosed = errors.New("provider plugin closed")

// New returns the Provider of cfg. It starts nothing: the first call
// does.
func New(cfg Config) (*Provider, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("provider plugin: %w", err)
	}
	return &Provider{cfg: cfg, backoff: cfg.MinBackoff}, nil
}

// Check starts the plugin of cfg, configures it and stops it: what the
// group's provider would meet at its first call (an executable that is
// no plugin, of another protocol version, or that refuses the config).
func Check(ctx context.Context, cfg Config) error {
	p, err := New(cfg)
	if err != nil {
		return err
	}
	c, err := p.start(ctx)
	c.client.Kill()
	if err != nil {
		return fmt.Errorf("provider plugin %s %v", cfg.Path, err)
	}
	return nil
}

// Close stops the plugin's process; later calls fail with ErrClosed.
func (p *Provider) Close() error {
	p.mu.Lock()
	c := p.cur
	p.cur, p.closed = nil, true
	if c != nil {
		c.stopped = true // a call failing on it now stops nothing more
	}
	p.mu.Unlock()
	if c != nil {
		c.client.Kill()
	}
	p.kills.Wait()
	return nil
}

// connect returns the running plugin, starting it if there is none and
// its backoff is over. A plugin found exited is stopped here, and the
// call fails, saying so: the group says why it did not act.
func (p *Provider) connect(ctx context.Context) (*conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if c := p.cur; c != nil {
		if !c.client.Exited() {
			return c, nil
		}
		p.stopLocked(c, fmt.Errorf("exited%s", c.stderr.said()))
		return nil, p.downLocked()
	}
	if p.down != nil && time.Now().Before(p.retryAt) {
		return nil, p.downLocked()
	}
	c, err := p.start(ctx)
	if err != nil {
		p.stopLocked(c, err)
		return nil, p.downLocked()
	}
	p.cur = c
	return c, nil
}

// start starts the plugin's process and configures it.
func (p *Provider) start(ctx context.Context) (*conn, error) {
	cmd := exec.Command(p.cfg.Path)
	cmd.SysProcAttr = sysProcAttr()
	stderr := &lastLine{lg: p.cfg.Logger.With(zap.String("plugin", p.cfg.Path))}
	client := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  Handshake,
		Plugins:          goplugin.PluginSet{pluginName: &grpcPlugin{}},
		Cmd:              cmd,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		AutoMTLS:         true,
		StartTimeout:     p.cfg.Timeout,
		// What the plugin writes to stderr before Serve, and after (which
		// go-plugin carries over its own stream).
		Stderr:     stderr,
		SyncStderr: stderr,
		Logger: hclog.New(&hclog.LoggerOptions{
			Name: "plugin", Level: hclog.Warn, Output: stderr.logWriter(),
		}),
	})
	c := &conn{client: client, stderr: stderr}
	proto, err := client.Client()
	if err != nil {
		return c, fmt.Errorf("could not start: %v%s", err, stderr.said())
	}
	raw, err := proto.Dispense(pluginName)
	if err != nil {
		return c, fmt.Errorf("could not start: %v", err)
	}
	c.rpc = raw.(pb.ProviderPluginClient)
	cctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	if _, err := c.rpc.Configure(cctx, &pb.PluginConfigureRequest{Config: p.cfg.Config}); err != nil {
		return c, fmt.Errorf("refused its config: %s", status.Convert(err).Message())
	}
	p.cfg.Logger.Info("started provider plugin", zap.String("plugin", p.cfg.Path))
	return c, nil
}

// stopLocked kills c, unless it was stopped already (calls at the same
// time that saw it fail stop it once, and none stops its successor), and
// holds the next start back for the backoff.
func (p *Provider) stopLocked(c *conn, why error) {
	if c.stopped {
		return
	}
	c.stopped = true
	if p.cur == c {
		p.cur = nil
	}
	p.down, p.wait = why, p.backoff
	p.retryAt = time.Now().Add(p.backoff)
	p.cfg.Logger.Warn("provider plugin stopped", zap.String("plugin", p.cfg.Path), zap.Error(why), zap.Duration("restart_in", p.backoff))
	p.backoff = min(2*p.backoff, p.cfg.MaxBackoff)
	// Kill waits a moment for a clean exit: not under the lock, nor in
	// the caller's time.
	p.kills.Go(c.client.Kill)
}

// downLocked is the error of a call while no plugin runs. Its text is
// the same for every call until the plugin is started again (the group
// loop records a reason when it changes).
func (p *Provider) downLocked() error {
	return fmt.Errorf("provider plugin %s %v: it is started again %v after that", p.cfg.Path, p.down, p.wait)
}

// call calls the plugin with f, within the call timeout. A plugin that
// does not answer in time, or whose connection breaks (it exited), is
// stopped; an error the plugin answered is the provider's, as it said it.
func (p *Provider) call(ctx context.Context, what string, f func(context.Context, pb.ProviderPluginClient) error) error {
	c, err := p.connect(ctx)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	err = f(cctx, c.rpc)
	// The deadline goes to the plugin with the call, and its end there
	// may come back (as a cancel) a moment before it is seen here.
	code := status.Code(err)
	timedOut := ctx.Err() == nil && (cctx.Err() != nil || code == codes.DeadlineExceeded || code == codes.Canceled)
	cancel()
	if err == nil {
		p.mu.Lock()
		p.down, p.backoff = nil, p.cfg.MinBackoff
		p.mu.Unlock()
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", what, ctx.Err()) // the caller gave up
	}
	var why error
	switch {
	case timedOut:
		why = fmt.Errorf("did not answer %s within %v (timeout)", what, p.cfg.Timeout)
	case code == codes.Unavailable || c.client.Exited():
		why = fmt.Errorf("exited during %s%s", what, c.stderr.said())
	default:
		return fmt.Errorf("%s: %s", what, status.Convert(err).Message())
	}
	p.mu.Lock()
	p.stopLocked(c, why)
	err = p.downLocked()
	p.mu.Unlock()
	return err
}

// Provision makes one new machine of spec through the plugin.
func (p *Provider) Provision(ctx context.Context, spec provider.Spec) (provider.Instance, error) {
	var in *pb.PluginInstance
	err := p.call(ctx, "provision", func(ctx context.Context, c pb.ProviderPluginClient) (err error) {
		in, err = c.Provision(ctx, &pb.PluginProvisionRequest{Spec: specToProto(spec)})
		return err
	})
	if err != nil {
		return provider.Instance{}, err
	}
	if in.GetId() == "" {
		return provider.Instance{}, fmt.Errorf("provider plugin %s: provision answered a machine with no id", p.cfg.Path)
	}
	return instanceFromProto(in), nil
}

// Destroy destroys machine id through the plugin.
func (p *Provider) Destroy(ctx context.Context, id string) error {
	return p.call(ctx, "destroy "+id, func(ctx context.Context, c pb.ProviderPluginClient) error {
		_, err := c.Destroy(ctx, &pb.PluginDestroyRequest{Id: id})
		return err
	})
}

// List returns the plugin's machines whose labels include selector's.
// What the plugin answers is filtered again here (provider.Matches): a
// plugin that ignores the selector lists no machine of another group.
// A plugin that could list some of its failure domains only returns what
// it listed with a *provider.UnreachableError naming the others.
func (p *Provider) List(ctx context.Context, selector map[string]string) ([]provider.Instance, error) {
	var res *pb.PluginListResponse
	err := p.call(ctx, "list", func(ctx context.Context, c pb.ProviderPluginClient) (err error) {
		res, err = c.List(ctx, &pb.PluginListRequest{Selector: selector})
		return err
	})
	if err != nil {
		return nil, err
	}
	var out []provider.Instance
	for _, in := range res.GetInstances() {
		if provider.Matches(in.GetLabels(), selector) {
			out = append(out, instanceFromProto(in))
		}
	}
	if un := res.GetUnreachable(); len(un) > 0 {
		ue := &provider.UnreachableError{Domains: map[string]error{}}
		for d, why := range un {
			ue.Domains[d] = errors.New(why)
		}
		return out, ue
	}
	return out, nil
}

// LastWords returns what the plugin keeps of dead machine id's last
// line, "" if nothing.
func (p *Provider) LastWords(ctx context.Context, id string) (string, error) {
	var res *pb.PluginLastWordsResponse
	err := p.call(ctx, "last words of "+id, func(ctx context.Context, c pb.ProviderPluginClient) (err error) {
		res, err = c.LastWords(ctx, &pb.PluginLastWordsRequest{Id: id})
		return err
	})
	return res.GetWords(), err
}

// ErrNoRelease is Runs' error for a plugin that does not say what its
// machines run (it answers Runs with Unimplemented): its groups have no
// release.
var ErrNoRelease = errors.New("the provider plugin does not say what its machines run")

// Runs returns what the plugin says the machines it would make now run,
// or ErrNoRelease when it does not say.
func (p *Provider) Runs(ctx context.Context) (provider.Runs, error) {
	var res *pb.PluginRunsResponse
	unimplemented := false
	err := p.call(ctx, "runs", func(ctx context.Context, c pb.ProviderPluginClient) (err error) {
		res, err = c.Runs(ctx, &pb.PluginRunsRequest{})
		if status.Code(err) == codes.Unimplemented {
			unimplemented = true
			return nil // an answer: the plugin is fine
		}
		return err
	})
	switch {
	case err != nil:
		return provider.Runs{}, err
	case unimplemented:
		return provider.Runs{}, fmt.Errorf("provider plugin %s: %w", p.cfg.Path, ErrNoRelease)
	}
	return provider.Runs{Binary: res.GetBinary(), Image: res.GetImage(), Digest: res.GetDigest()}, nil
}

// lastLine logs each line a plugin writes to stderr, and keeps the last,
// which says why a plugin exited more often than not.
type lastLine struct {
	lg   *zap.Logger
	mu   sync.Mutex
	buf  []byte
	last string
}

func (l *lastLine) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, b...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		if line := strings.TrimSpace(string(l.buf[:i])); line != "" {
			l.last = provider.LastLine([]byte(line))
			l.lg.Info("plugin stderr", zap.String("line", line))
		}
		l.buf = l.buf[i+1:]
	}
}

// said is ": its last words" when the plugin wrote any, else "".
func (l *lastLine) said() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == "" {
		return ""
	}
	return " (its last line on stderr: " + l.last + ")"
}

// logWriter is where go-plugin's own warnings go: the same log.
func (l *lastLine) logWriter() *zapWriter { return &zapWriter{lg: l.lg} }

type zapWriter struct{ lg *zap.Logger }

func (w *zapWriter) Write(b []byte) (int, error) {
	w.lg.Warn("go-plugin", zap.String("line", strings.TrimSpace(string(b))))
	return len(b), nil
}

// pid is the running plugin's pid, 0 if none (for the tests).
func (p *Provider) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == nil {
		return 0
	}
	if rc := p.cur.client.ReattachConfig(); rc != nil {
		return rc.Pid
	}
	return 0
}
