package main

// curator ui: the dashboard, served on the operator's machine (as kubectl
// proxy and nomad ui are) with the operator's own client config. No manager
// serves a page: the managers serve mTLS gRPC only, and this process is
// the admin certificate's holder. It keeps the leader's watches open
// (nodes, events) and asks for the cluster and the groups each second, and
// pushes the whole picture to each open page as server-sent events at every
// change.

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/curatorproject/curator/client"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

//go:embed ui
var uiAssets embed.FS

// Defaults of curator ui.
const (
	DefaultUIListen = "127.0.0.1:8080"
	// uiPollInterval is how often the cluster and the groups are read
	// (nothing watches them).
	uiPollInterval = time.Second
	// uiEvents is how many of the newest events the page shows.
	uiEvents = 200
	// uiRetry is the pause before a watch that gave up starts again.
	uiRetry = 2 * time.Second
	// uiKeepRemoved is how long the page keeps showing a node that left
	// the cluster, as it last was: a killed machine's node goes down and
	// its group removes it within seconds, which the operator would
	// otherwise miss.
	uiKeepRemoved = time.Minute
)

func newUICommand(g *globalFlags) *cobra.Command {
	var listen string
	var allowRemote bool
	c := &cobra.Command{
		Use:   "ui",
		Short: "Serve a live dashboard of the cluster on this machine",
		Long: `Serve a live dashboard of the cluster at http://LISTEN: cluster health (the
curator leader, the etcd leader, voters and quorum), the nodes, the groups
with their rollouts, and the events as they come. It runs here, with this
machine's client config (as kubectl proxy does): the page needs no
certificate, so whoever reaches the address sees the cluster. It listens on
loopback unless --allow-remote.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkUIListen(listen, allowRemote); err != nil {
				return err
			}
			return g.dial(cmd.Context(), func(ctx context.Context, c *client.Client) error {
				ln, err := net.Listen("tcp", listen)
				if err != nil {
					return fmt.Errorf("ui: %w", err)
				}
				where := "loopback only: this machine alone can open it"
				if allowRemote {
					where = "--allow-remote: anyone who reaches this address sees the cluster, without a certificate"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Dashboard at http://%s (%s). Ctrl-C to stop.\n", ln.Addr(), where)
				d := newDashboard()
				if cfg, err := client.LoadConfig(g.configPath()); err == nil {
					if name, role, err := cfg.Operator(g.configPath()); err == nil {
						d.operator = &uiOperator{Name: name, Role: role, May: operatorMay[role]}
					}
				}
				return d.serve(ctx, c, ln)
			}, client.WithoutFollowUntilCancelled())
		},
	}
	c.Flags().StringVar(&listen, "listen", DefaultUIListen, "IP:PORT to serve the dashboard on")
	c.Flags().BoolVar(&allowRemote, "allow-remote", false, "allow a --listen address other than loopback (the page has no authentication)")
	return c
}

// checkUIListen refuses an address that is not loopback without
// allowRemote: the page shows the cluster to whoever opens it.
func checkUIListen(listen string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("--listen %q: want IP:PORT: %w", listen, err)
	}
	if allowRemote {
		return nil
	}
	ip := net.ParseIP(host)
	if host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return nil
	}
	return fmt.Errorf("--listen %s is not a loopback address: the dashboard has no authentication of its own, so anyone who reaches it sees the cluster; pass --allow-remote to mean it", listen)
}

// uiState is what the page shows, as it gets it.
type uiState struct {
	Cluster *clusterInfoJSON `json:"cluster"`
	Nodes   []uiNode         `json:"nodes"`
	Groups  []groupJSON      `json:"groups"`
	// Events are the newest, oldest first.
	Events []eventJSON `json:"events"`
	// Errors say what could not be read, by what: "nodes", "events",
	// "cluster", "groups".
	Errors  map[string]string `json:"errors"`
	Updated time.Time         `json:"updated"`
	// DownSince is when the dashboard last heard from a manager, while
	// none answers (the tables keep what it had then); Down is why.
	DownSince *time.Time `json:"down_since,omitempty"`
	Down      string     `json:"down,omitempty"`
	// Operator is whom the dashboard reads as: the client config's
	// certificate, its role, and what that role may do.
	Operator *uiOperator `json:"operator,omitempty"`
}

// uiOperator is the certificate the dashboard reads with.
type uiOperator struct {
	Name string `json:"name"`
	Role string `json:"role"`
	May  string `json:"may"`
}

// operatorMay says in short what each operator role may do (docs/operators.md).
var operatorMay = map[string]string{
	pki.OperatorReader:   "read only: may look, not change",
	pki.OperatorOperator: "may change nodes, groups and rollouts; not what machines run (a group's provider, environment, host flags), tokens, certificates or cluster settings",
	pki.OperatorAdmin:    "full access",
}

// uiNode is a node on the page: as node ls -o json shows it, and when it
// left the cluster if it did.
type uiNode struct {
	nodeJSON
	Removed *time.Time `json:"removed,omitempty"`
}

// removedNode is a node that left the cluster, as it last was.
type removedNode struct {
	v  *pb.NodeView
	at time.Time
}

// dashboard holds the cluster as the watches and polls report it.
type dashboard struct {
	mu      sync.Mutex
	nodes   map[string]*pb.NodeView
	removed map[string]removedNode
	info    *pb.ClusterInfo
	groups  []*pb.GroupView
	events  []*pb.Event
	errs    map[string]string
	updated time.Time
	// heard is when a manager last answered; down is set while none
	// does (see outage).
	heard time.Time
	down  string
	// operator is whom the dashboard reads as (nil: not known).
	operator *uiOperator
	// changed is closed, and made anew, at each change.
	changed chan struct{}
}

func newDashboard() *dashboard {
	return &dashboard{nodes: map[string]*pb.NodeView{}, removed: map[string]removedNode{}, errs: map[string]string{}, changed: make(chan struct{})}
}

// update changes the state under the lock and wakes the pages.
func (d *dashboard) update(fn func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fn()
	d.updated = time.Now()
	close(d.changed)
	d.changed = make(chan struct{})
}

// setErr records (err nil: clears) what failed in reading what. A read that
// no manager answered marks an outage (the page says so once, and keeps
// the last state); any answer ends it.
func (d *dashboard) setErr(what string, err error) {
	d.mu.Lock()
	old, had := d.errs[what]
	outage := err != nil && errors.Is(err, client.ErrNoManager) && d.down == ""
	d.mu.Unlock()
	if !outage && ((err == nil && !had) || (err != nil && old == apiError(what, err).Error())) {
		return
	}
	d.update(func() {
		if err == nil {
			delete(d.errs, what)
		} else {
			d.errs[what] = apiError(what, err).Error()
		}
		if outage {
			d.down = err.Error()
		}
	})
}

// heardFrom notes that a manager answered a poll; the pages are woken only
// if that ends an outage.
func (d *dashboard) heardFrom() {
	d.mu.Lock()
	down := d.down != ""
	if !down {
		d.heard = time.Now()
	}
	d.mu.Unlock()
	if down {
		d.update(d.answered)
	}
}

// answered notes, under the lock, that a manager answered: any outage is
// over.
func (d *dashboard) answered() {
	d.heard = time.Now()
	d.down = ""
}

// state is the page's view now, and the channel closed at the next change.
func (d *dashboard) state() (uiState, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := uiState{
		Nodes:    []uiNode{},
		Groups:   []groupJSON{},
		Events:   []eventJSON{},
		Errors:   maps.Clone(d.errs),
		Updated:  d.updated,
		Operator: d.operator,
	}
	if d.down != "" {
		since := d.heard.UTC()
		s.DownSince, s.Down = &since, d.down
	}
	for _, n := range sortedNodeJSON(slices.Collect(maps.Values(d.nodes))) {
		s.Nodes = append(s.Nodes, uiNode{nodeJSON: n})
	}
	for id, r := range d.removed {
		if time.Since(r.at) > uiKeepRemoved {
			delete(d.removed, id)
			continue
		}
		at := r.at.UTC()
		s.Nodes = append(s.Nodes, uiNode{nodeJSON: nodeToJSON(r.v), Removed: &at})
	}
	if d.info != nil {
		j := clusterInfoToJSON(d.info)
		s.Cluster = &j
	}
	for _, g := range d.groups {
		s.Groups = append(s.Groups, groupToJSON(g))
	}
	names := map[string]string{}
	for id, n := range d.nodes {
		names[id] = n.GetNode().GetName()
	}
	for _, e := range d.events {
		s.Events = append(s.Events, eventToJSON(e, names))
	}
	return s, d.changed
}

// serve runs the watches and the polls, and serves the page on ln, until
// ctx ends.
func (d *dashboard) serve(ctx context.Context, c *client.Client, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, run := range []func(context.Context, *client.Client){d.watchNodes, d.watchEvents, d.poll} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(ctx, c)
		}()
	}
	srv := &http.Server{Handler: d.handler(), BaseContext: func(net.Listener) context.Context { return ctx }, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = srv.Shutdown(sctx)
		<-errc
		return nil
	case err := <-errc:
		return fmt.Errorf("ui: %w", err)
	}
}

// watchNodes keeps the node watch open: after a failure it says so on the
// page and starts again.
func (d *dashboard) watchNodes(ctx context.Context, c *client.Client) {
	for ctx.Err() == nil {
		err := c.WatchNodes(ctx, func(resp *pb.WatchNodesResponse) error {
			d.update(func() {
				d.answered()
				delete(d.errs, "nodes")
				if resp.GetSnapshot() {
					clear(d.nodes)
				}
				for _, v := range resp.GetNodes() {
					d.nodes[v.GetNode().GetId()] = v
					delete(d.removed, v.GetNode().GetId())
				}
				for _, id := range resp.GetRemoved() {
					if v, ok := d.nodes[id]; ok {
						d.removed[id] = removedNode{v: v, at: time.Now()}
					}
					delete(d.nodes, id)
				}
			})
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		d.setErr("nodes", err)
		_ = supervisor.Sleep(ctx, uiRetry)
	}
}

// watchEvents keeps the event watch open, resuming where it was.
func (d *dashboard) watchEvents(ctx context.Context, c *client.Client) {
	var after int64
	for ctx.Err() == nil {
		err := c.WatchEvents(ctx, after, uiEvents, func(resp *pb.WatchEventsResponse) error {
			after = max(after, resp.GetRevision())
			d.update(func() {
				d.answered()
				delete(d.errs, "events")
				d.events = append(d.events, resp.GetEvents()...)
				if n := len(d.events); n > uiEvents {
					d.events = slices.Clone(d.events[n-uiEvents:])
				}
			})
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		d.setErr("events", err)
		_ = supervisor.Sleep(ctx, uiRetry)
	}
}

// poll reads the cluster and the groups each uiPollInterval.
func (d *dashboard) poll(ctx context.Context, c *client.Client) {
	for {
		rctx, cancel := context.WithTimeout(ctx, callTimeout)
		info, err := c.ClusterInfo(rctx)
		if err == nil && !d.same(func() bool { return proto.Equal(d.info, info) }) {
			d.update(func() { d.info = info })
		}
		if err == nil {
			d.heardFrom()
		}
		d.setErr("cluster", err)
		groups, err := c.ListGroups(rctx)
		cancel()
		if err == nil && !d.same(func() bool {
			return slices.EqualFunc(d.groups, groups, func(a, b *pb.GroupView) bool { return proto.Equal(a, b) })
		}) {
			d.update(func() { d.groups = groups })
		}
		d.setErr("groups", err)
		if supervisor.Sleep(ctx, uiPollInterval) != nil {
			return
		}
	}
}

// same runs eq under the lock.
func (d *dashboard) same(eq func() bool) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return eq()
}

func (d *dashboard) handler() http.Handler {
	mux := http.NewServeMux()
	assets, _ := fs.Sub(uiAssets, "ui")
	mux.Handle("GET /", http.FileServerFS(assets))
	mux.HandleFunc("GET /api/state", func(w http.ResponseWriter, _ *http.Request) {
		s, _ := d.state()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(s)
	})
	mux.HandleFunc("GET /api/stream", d.stream)
	return mux
}

// stream sends the state to a page at once and again at each change (at
// most every 100 ms), as server-sent events, until the page goes or the
// dashboard stops.
func (d *dashboard) stream(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	ctx := r.Context()
	for {
		s, changed := d.state()
		data, err := json.Marshal(s)
		if err != nil {
			return
		}
		if _, err := fmt.Fprintf(w, "event: state\ndata: %s\n\n", data); err != nil {
			return
		}
		flusher.Flush()
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		if supervisor.Sleep(ctx, 100*time.Millisecond) != nil {
			return
		}
	}
}
