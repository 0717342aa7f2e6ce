package main

// The cluster under test: real curator processes on loopback addresses,
// started the way `curator dev` and the e2e harness start them (`agent init`
// for the first, `agent join` with the manager token for the others, each a
// voter before the next), and the operator's view of it: the admin
// credential the first node wrote, and the etcd credential of a member for
// reading etcd's revision.

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/curatorproject/curator/client"
	"github.com/curatorproject/curator/internal/localcluster"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// Files and ports of a node, as README and the agent's data dir layout
// (node/state.go) define them.
const (
	consensusFile     = "consensus.json" // a member's etcd join parameters, with its etcd certificate
	nodeKeyFile       = "node.key"
	etcdClientOffset  = 2 // etcd client port: PORT+2
	agentLogFile      = "agent.log"
	clusterConfigFile = "config.yaml"
)

// Bounds of bringing the cluster up.
const (
	clusterStepTimeout = 2 * time.Minute
	clusterPoll        = 200 * time.Millisecond
	// adminAttemptTimeout is how long one manager gets to answer one
	// management call: a list of thousands of nodes takes a while.
	adminAttemptTimeout = 30 * time.Second
	logTailLines        = 20
)

// managerProc is one curator agent process.
type managerProc struct {
	name    string
	listen  netip.AddrPort
	dataDir string
	cmd     *exec.Cmd
	// exited is closed when the process has exited; err is then set.
	exited chan struct{}
	err    error
	// killed is set when the bench killed it on purpose: a wait goes on.
	killed bool
}

func (m *managerProc) pid() int { return m.cmd.Process.Pid }

func (m *managerProc) alive() bool { return m.Exited() == nil }

// Address, DataDir, LogFile and Exited make m a localcluster.Process.
func (m *managerProc) Address() string { return m.listen.String() }
func (m *managerProc) DataDir() string { return m.dataDir }
func (m *managerProc) LogFile() string { return filepath.Join(m.dataDir, agentLogFile) }

func (m *managerProc) Exited() error {
	select {
	case <-m.exited:
		if m.err == nil {
			return errors.New("exit status 0")
		}
		return m.err
	default:
		return nil
	}
}

// logTail is the end of the manager's log, for an error message.
func (m *managerProc) logTail() string {
	data, err := os.ReadFile(m.LogFile())
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	return strings.Join(lines, "\n")
}

// cluster is the managers the bench started and the operator's access to
// them.
type cluster struct {
	cfg      clusterConfig
	progress *progress
	dir      string
	temp     bool
	bin      string
	managers []*managerProc
	// cfgPath is the admin client config naming every manager.
	cfgPath     string
	admin       *client.Client
	workerToken string

	// rssBefore is each manager's RSS (by pid) before the join wave, so
	// that what the fleet costs a manager can be told from its baseline.
	rssBefore map[int]uint64

	etcdOnce sync.Once
	etcdTLS  *tls.Config
	etcd     *clientv3.Client
	etcdErr  error
}

// startCluster starts cfg.managers curator processes on addrs, brought up
// as `curator dev` brings its own up (internal/localcluster), and returns
// once every one is an etcd voter and ready. Close the cluster, also on
// error.
func startCluster(ctx context.Context, cfg clusterConfig, addrs []netip.AddrPort, p *progress) (c *cluster, err error) {
	c = &cluster{cfg: cfg, progress: p, dir: cfg.dir}
	// The returns below set c to nil: close the cluster they started.
	started := c
	defer func() {
		if err != nil {
			started.close()
			c = nil
		}
	}()
	if c.dir == "" {
		if c.dir, err = os.MkdirTemp("", "curator-bench-"); err != nil {
			return nil, err
		}
		c.temp = true
	}
	if c.dir, err = filepath.Abs(c.dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return nil, err
	}
	if c.bin, err = curatorBinary(ctx, cfg.curator, c.dir, p); err != nil {
		return nil, err
	}
	nodes := make([]localcluster.Node, len(addrs))
	addrOf := map[string]netip.AddrPort{}
	for i, a := range addrs {
		nodes[i] = localcluster.Node{Name: "manager-" + strconv.Itoa(i+1), Manager: true}
		addrOf[nodes[i].Name] = a
	}
	c.cfgPath = filepath.Join(c.dir, clusterConfigFile)
	if _, err := localcluster.Up(ctx, localcluster.Config{
		Nodes: nodes, ClientConfig: c.cfgPath, StepTimeout: clusterStepTimeout, Poll: clusterPoll,
		Start: func(_ context.Context, l localcluster.Launch) (localcluster.Process, error) {
			var env []string
			for k, v := range l.Env {
				env = append(env, k+"="+v)
			}
			return c.start(l.Node.Name, addrOf[l.Node.Name], env, l.Verb, l.Args...)
		},
	}); err != nil {
		return nil, err
	}
	ccfg, err := client.LoadConfig(c.cfgPath)
	if err != nil {
		return nil, err
	}
	c.admin, err = client.Dial(ctx, ccfg, c.cfgPath, client.WithAttemptTimeout(adminAttemptTimeout), client.WithCachePath(""))
	if err != nil {
		return nil, err
	}
	if err := c.waitFor(ctx, "the worker token", func(ctx context.Context) error {
		c.workerToken, err = c.admin.Token(ctx, "worker")
		return err
	}); err != nil {
		return nil, err
	}
	p.printf("cluster of %d managers up in %s (logs: %s/NAME/%s)", len(addrs), c.dir, c.dir, agentLogFile)
	return c, nil
}

// curatorBinary returns path if set, else builds ./cmd/curator of the
// module in the working directory into dir.
func curatorBinary(ctx context.Context, path, dir string, p *progress) (string, error) {
	if path != "" {
		abs, err := filepath.Abs(path)
		if err != nil {
			return "", err
		}
		if _, err := os.Stat(abs); err != nil {
			return "", fmt.Errorf("--curator: %w", err)
		}
		return abs, nil
	}
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("no --curator, and `go env GOMOD` failed (%w): pass --curator PATH", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("no --curator, and not inside the curator module: pass --curator PATH")
	}
	bin := filepath.Join(dir, "curator")
	p.printf("building %s", bin)
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/curator")
	build.Dir = filepath.Dir(gomod)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/curator in %s: %w (or pass --curator PATH)", build.Dir, err)
	}
	return bin, nil
}

// start runs `curator agent VERB --data-dir DIR/NAME --listen ADDR ARGS`
// with the cluster's timers, its output in DIR/NAME/agent.log.
func (c *cluster) start(name string, addr netip.AddrPort, env []string, verb string, args ...string) (*managerProc, error) {
	dataDir := filepath.Join(c.dir, name)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	argv := []string{"agent", verb, "--data-dir", dataDir, "--listen", addr.String(),
		"--heartbeat-interval", c.cfg.interval.String(), "--down-after", c.cfg.downAfter.String(),
		"--election-ttl", c.cfg.electionTTL.String()}
	if c.cfg.pprof {
		argv = append(argv, "--pprof")
	}
	argv = append(argv, c.cfg.nodeArgs[name]...)
	return c.run(name, addr, dataDir, env, append(argv, args...))
}

func (c *cluster) run(name string, addr netip.AddrPort, dataDir string, env, argv []string) (*managerProc, error) {
	log, err := os.OpenFile(filepath.Join(dataDir, agentLogFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer log.Close() // the child holds its own copy
	cmd := exec.Command(c.bin, argv...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	m := &managerProc{name: name, listen: addr, dataDir: dataDir, cmd: cmd, exited: make(chan struct{})}
	go func() {
		m.err = cmd.Wait()
		close(m.exited)
	}()
	c.managers = append(c.managers, m)
	c.progress.printf("started %s on %s (pid %d)", name, addr, cmd.Process.Pid)
	return m, nil
}

// waitFor polls check until it succeeds, a manager exits, ctx ends or
// clusterStepTimeout passes.
func (c *cluster) waitFor(ctx context.Context, what string, check func(context.Context) error) error {
	return localcluster.Wait(ctx, clusterStepTimeout, clusterPoll, what, check, c.exited)
}

// exited reports the first manager that has exited, with its last words,
// unless the bench killed it.
func (c *cluster) exited() error {
	for _, m := range c.managers {
		if err := m.Exited(); err != nil && !m.killed {
			return fmt.Errorf("%s exited (%v); its log ends:\n%s", m.name, err, m.logTail())
		}
	}
	return nil
}

// leader returns the curator leader's node ID and its process.
func (c *cluster) leader(ctx context.Context) (string, *managerProc, error) {
	info, err := c.admin.ClusterInfo(ctx)
	if err != nil {
		return "", nil, err
	}
	id := info.GetLeader()
	if id == "" {
		return "", nil, errors.New("no curator leader")
	}
	name := info.GetNames()[id]
	i := slices.IndexFunc(c.managers, func(m *managerProc) bool { return m.name == name })
	if i < 0 {
		return id, nil, fmt.Errorf("the leader %s (%q) is none of the bench's managers", id, name)
	}
	return id, c.managers[i], nil
}

// waitLeader waits until a curator leader other than not answers.
func (c *cluster) waitLeader(ctx context.Context, not string) (string, *managerProc, error) {
	var id string
	var m *managerProc
	err := c.waitFor(ctx, "a new curator leader", func(ctx context.Context) error {
		var err error
		id, m, err = c.leader(ctx)
		if err == nil && id == not {
			return errors.New("the old leader still leads")
		}
		return err
	})
	return id, m, err
}

// listNodes lists every node through the management API, following the
// pages until the last, with pageSize (0: the server's choice). It returns
// the nodes, the pages it took and their size in bytes on the wire.
func (c *cluster) listNodes(ctx context.Context, pageSize uint32) (nodes []*pb.NodeView, pages, size int, err error) {
	return listPages(ctx, pageSize, func(ctx context.Context, req *pb.ListNodesRequest) (*pb.ListNodesResponse, error) {
		var resp *pb.ListNodesResponse
		err := c.admin.Management(ctx, func(ctx context.Context, m pb.ManagementClient) error {
			var err error
			resp, err = m.ListNodes(ctx, req)
			return err
		})
		return resp, err
	})
}

// listPages calls list for one page after another until next_page_token
// is empty. A server that does not page answers everything at once with
// no token, which is one page.
func listPages(ctx context.Context, pageSize uint32, list func(context.Context, *pb.ListNodesRequest) (*pb.ListNodesResponse, error)) (nodes []*pb.NodeView, pages, size int, err error) {
	token := ""
	for {
		resp, err := list(ctx, &pb.ListNodesRequest{PageSize: pageSize, PageToken: token})
		if err != nil {
			return nil, pages, size, fmt.Errorf("list nodes (page %d): %w", pages+1, err)
		}
		pages++
		size += proto.Size(resp)
		nodes = append(nodes, resp.GetNodes()...)
		next := resp.GetNextPageToken()
		if next == "" {
			return nodes, pages, size, nil
		}
		if next == token {
			return nil, pages, size, fmt.Errorf("list nodes: page %d gives the same next_page_token %q again", pages, token)
		}
		token = next
	}
}

// etcdClient connects to every manager's etcd with the etcd credential of
// manager-1 (a consensus member's certificate, from its data dir: etcd
// trusts nothing else).
func (c *cluster) etcdClient() (*clientv3.Client, error) {
	c.etcdOnce.Do(func() {
		if c.etcdTLS, c.etcdErr = etcdCredential(c.managers[0].dataDir); c.etcdErr != nil {
			return
		}
		var endpoints []string
		for _, m := range c.managers {
			endpoints = append(endpoints, etcdEndpoint(m))
		}
		c.etcd, c.etcdErr = clientv3.New(clientv3.Config{
			Endpoints:   endpoints,
			DialTimeout: 5 * time.Second,
			TLS:         c.etcdTLS,
			Logger:      zap.NewNop(),
		})
	})
	return c.etcd, c.etcdErr
}

func etcdEndpoint(m *managerProc) string {
	return netip.AddrPortFrom(m.listen.Addr(), m.listen.Port()+etcdClientOffset).String()
}

// etcdCredential is the TLS client configuration of the consensus member
// whose data dir is dir.
func etcdCredential(dir string) (*tls.Config, error) {
	data, err := os.ReadFile(filepath.Join(dir, consensusFile))
	if err != nil {
		return nil, fmt.Errorf("etcd credential: %w", err)
	}
	join := &pb.ConsensusJoin{}
	if err := protojson.Unmarshal(data, join); err != nil {
		return nil, fmt.Errorf("etcd credential: %s: %w", consensusFile, err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, nodeKeyFile))
	if err != nil {
		return nil, fmt.Errorf("etcd credential: %w", err)
	}
	cert, err := pki.DecodeCert(join.EtcdCert)
	if err != nil {
		return nil, fmt.Errorf("etcd credential: %w", err)
	}
	key, err := pki.DecodeKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("etcd credential: %w", err)
	}
	ca, err := pki.DecodeCert(join.EtcdCa)
	if err != nil {
		return nil, fmt.Errorf("etcd credential: %w", err)
	}
	return pki.ClientTLS(pki.TLSCertificate(cert, key), ca), nil
}

// etcdKeysWritten is how many keys member m's etcd has put and deleted
// since it started, from the Prometheus metrics etcd serves on its client
// port (etcd_mvcc_put_total, etcd_mvcc_delete_total). Every member applies
// every write, so one member's count is the cluster's. Unlike the
// revision, a transaction that writes many keys counts each.
func (c *cluster) etcdKeysWritten(ctx context.Context, m *managerProc) (uint64, error) {
	if _, err := c.etcdClient(); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+etcdEndpoint(m)+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: c.etcdTLS}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("etcd metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("etcd metrics: %s", resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("etcd metrics: %w", err)
	}
	v, err := counters(body, "etcd_mvcc_put_total", "etcd_mvcc_delete_total")
	if err != nil {
		return 0, fmt.Errorf("etcd metrics: %w", err)
	}
	return uint64(v[0] + v[1]), nil
}

// counters reads the values of the unlabelled metrics names from a
// Prometheus text exposition.
func counters(body []byte, names ...string) ([]float64, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(names))
	for i, name := range names {
		found := false
		for _, m := range families[name].GetMetric() {
			if len(m.GetLabel()) > 0 {
				continue
			}
			switch {
			case m.Counter != nil:
				out[i] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[i] = m.GetGauge().GetValue()
			case m.Untyped != nil:
				out[i] = m.GetUntyped().GetValue()
			default:
				return nil, fmt.Errorf("%s is not a single value", name)
			}
			found = true
		}
		if !found {
			return nil, fmt.Errorf("no %s", name)
		}
	}
	return out, nil
}

// leaderHeartbeats is how many heartbeats manager m took, as the leader,
// on the nodes' session streams and in its followers' liveness digests,
// from the metrics its agent serves at PORT+3.
func leaderHeartbeats(ctx context.Context, m *managerProc) (read, digested float64, err error) {
	v, err := curatorCounters(ctx, m, "curator_session_heartbeats_total", "curator_liveness_heartbeats_total")
	if err != nil {
		return 0, 0, err
	}
	return v[0], v[1], nil
}

// connections is how many connections the managers' gRPC servers took
// up, each after a TLS handshake, in all.
func (c *cluster) connections(ctx context.Context) (float64, error) {
	var sum float64
	for _, m := range c.managers {
		v, err := curatorCounters(ctx, m, "curator_connections_total")
		if err != nil {
			return 0, err
		}
		sum += v[0]
	}
	return sum, nil
}

// curatorCounters reads the unlabelled metrics names of manager m, from
// the metrics its agent serves at PORT+3.
func curatorCounters(ctx context.Context, m *managerProc, names ...string) ([]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	url := fmt.Sprintf("http://%s/metrics", netip.AddrPortFrom(m.listen.Addr(), m.listen.Port()+3))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("curator metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("curator metrics: %w", err)
	}
	v, err := counters(body, names...)
	if err != nil {
		return nil, fmt.Errorf("curator metrics: %w", err)
	}
	return v, nil
}

// etcdRevision is etcd's current revision, from the header of a
// linearizable read: it grows by one for every write (a put, a delete or a
// transaction that writes), and by nothing for reads, watches or lease
// keep-alives.
func (c *cluster) etcdRevision(ctx context.Context) (int64, error) {
	cli, err := c.etcdClient()
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "/curator-bench/revision", clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("etcd revision: %w", err)
	}
	return resp.Header.Revision, nil
}

// kill sends SIGKILL to m and waits for it to exit.
func (c *cluster) kill(m *managerProc) {
	m.killed = true
	_ = m.cmd.Process.Kill() // fails only if it has exited
	<-m.exited
}

// close kills every manager (the cluster is disposable: a clean stop of
// several managers together costs seconds of etcd leader transfers) and
// removes a temporary dir.
func (c *cluster) close() {
	if c.admin != nil {
		_ = c.admin.Close()
	}
	if c.etcd != nil {
		_ = c.etcd.Close()
	}
	for _, m := range c.managers {
		_ = m.cmd.Process.Kill()
	}
	for _, m := range c.managers {
		<-m.exited
	}
	if c.temp {
		if err := os.RemoveAll(c.dir); err != nil {
			c.progress.printf("could not remove %s: %v", c.dir, err)
		}
	}
}

// progress writes human progress lines to stderr, each with the time since
// the bench started.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
}

func newProgress(w io.Writer) *progress { return &progress{w: w, start: time.Now()} }

func (p *progress) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "[%7.1fs] %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, args...))
}
