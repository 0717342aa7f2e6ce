package history

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/curatorproject/curator/client"
	"github.com/curatorproject/curator/curator/spec"
	pb "github.com/curatorproject/curator/proto"
)

// LabelKey is the node label the workload writes.
const LabelKey = "history"

// Workload is what the recording clients do: one client per manager in
// Managers, each pinned to it (client.WithOnlyManager), calling the API
// one call after another, at random among the registers it is given.
type Workload struct {
	// Config and ConfigPath are the cluster's client config (dev's
	// config.yaml).
	Config     *client.Config
	ConfigPath string
	// Managers are the managers' addresses, and Clients how many clients
	// call them (default: one per manager): client i is pinned to
	// Managers[i], and moves to the next one after failing for repin
	// (a manager killed for good).
	Managers []string
	Clients  int
	// Nodes are the nodes whose label LabelKey the clients write.
	Nodes []string
	// Availability: the clients also set the Nodes' availability
	// (active or pause). Off where a loop drains nodes itself (a
	// rollout): the register would have a writer the history does not
	// see.
	Availability bool
	// Roles are nodes the clients promote and demote.
	Roles []string
	// Groups: the clients commit groups of their own, of size 0 (no
	// machine is made), made from Group's spec: each commit a new
	// template version, a new config SHA. Nil: none.
	Group  *pb.GroupSpec
	Groups int
	// WritePause is the least time between two writes of one client:
	// each write records an event (the operator's call, a commit), and
	// the events kept are bounded; a run that checks its own events
	// keeps them from being trimmed.
	WritePause time.Duration
	// Seed draws the clients' calls.
	Seed uint64
	// Pause is the time between two calls of one client.
	Pause time.Duration
	// Logf, if set, is told what the workload does.
	Logf func(format string, args ...any)
}

// clients is how many clients call.
func (w *Workload) clients() int {
	if w.Clients > 0 {
		return w.Clients
	}
	return len(w.Managers)
}

// repin is how long a client fails before it moves to the next manager.
const repin = 5 * time.Second

// callTimeout bounds one call of the workload: past it the outcome is
// unknown.
const callTimeout = 5 * time.Second

// groupName is the name of the workload's group i.
func groupName(i int) string { return fmt.Sprintf("history-%d", i) }

// Run records the workload's calls in rec until ctx ends, and watches
// the events and the nodes meanwhile (Watch). The registers' first values
// are read before any client starts (Init).
func (w *Workload) Run(ctx context.Context, rec *Recorder) error {
	if len(w.Managers) == 0 {
		return errors.New("history: no manager to call")
	}
	setup, err := client.Dial(ctx, w.Config, w.ConfigPath, client.WithCachePath(""))
	if err != nil {
		return err
	}
	defer setup.Close()
	if err := w.init(ctx, setup, rec); err != nil {
		return fmt.Errorf("history: first values: %w", err)
	}
	var wg sync.WaitGroup
	for i := range w.clients() {
		cl := &recClient{w: w, rec: rec, id: i, at: i, healthy: true, rnd: rand.New(rand.NewPCG(w.Seed, uint64(i)))}
		if err := cl.dial(ctx); err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { cl.c.Close() }()
			cl.run(ctx)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		w.watchEvents(ctx, rec)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		w.watchNodes(ctx, rec)
	}()
	wg.Wait()
	return nil
}

// init reads every register's value before the clients start, and
// commits the workload's groups twice (made, then a new version: so that
// each has a rollout record whose target rollout status reads).
func (w *Workload) init(ctx context.Context, c *client.Client, rec *Recorder) error {
	for i := range w.groupCount() {
		for v := range 2 {
			gs := w.groupSpec(i, fmt.Sprintf("init-%d", v))
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			_, _, err := c.CommitGroup(cctx, gs)
			cancel()
			if err != nil {
				return fmt.Errorf("commit group %s: %w", gs.Name, err)
			}
		}
	}
	call := rec.Now()
	nodes, err := c.ListNodes(ctx)
	if err != nil {
		return err
	}
	ret := rec.Now()
	byID := map[string]*pb.Node{}
	for _, n := range nodes {
		byID[n.GetNode().GetId()] = n.GetNode()
	}
	ids := slices.Concat(w.Nodes, w.Roles)
	slices.Sort(ids)
	for _, id := range slices.Compact(ids) {
		n := byID[id]
		if n == nil {
			return fmt.Errorf("no node %s", id)
		}
		for key, v := range nodeValues(n) {
			if keyNode(key, id, w, slices.Contains(w.Roles, id)) {
				rec.Add(w.clients(), Input{Key: key, Kind: Init, Call: "ListNodes (setup)"}, call, ret, Output{Value: v})
			}
		}
	}
	for i := range w.groupCount() {
		call := rec.Now()
		g, err := c.GetGroup(ctx, groupName(i))
		if err != nil {
			return err
		}
		rec.Add(w.clients(), Input{Key: KeyGroup + groupName(i), Kind: Init, Call: "GetGroup (setup)"}, call, rec.Now(), Output{Value: g.GetGroup().GetConfigSha()})
	}
	return nil
}

// keyNode says whether the workload checks register key of node id.
func keyNode(key, id string, w *Workload, role bool) bool {
	switch key {
	case KeyLabel + id:
		return slices.Contains(w.Nodes, id)
	case KeyAvailability + id:
		return w.Availability && slices.Contains(w.Nodes, id)
	case KeyRole + id:
		return role
	}
	return false
}

// nodeValues is what a node's record holds of the registers.
func nodeValues(n *pb.Node) map[string]string {
	role := "-"
	if spec.HasRole(n, pb.Role_ROLE_CONSENSUS) {
		role = "consensus"
	}
	return map[string]string{
		KeyLabel + n.GetId():        n.GetLabels()[LabelKey],
		KeyAvailability + n.GetId(): n.GetAvailability().String(),
		KeyRole + n.GetId():         role,
	}
}

func (w *Workload) groupCount() int {
	if w.Group == nil {
		return 0
	}
	return max(w.Groups, 1)
}

// groupSpec is the workload's group i at template version v: Group's
// spec, its own name, size 0, workers.
func (w *Workload) groupSpec(i int, v string) *pb.GroupSpec {
	gs := proto.Clone(w.Group).(*pb.GroupSpec)
	gs.Name, gs.Size, gs.Roles = groupName(i), 0, []pb.Role{pb.Role_ROLE_WORKER}
	gs.Template.Version = v
	spec.NormalizeGroupSpec(gs)
	return gs
}

// recClient is one recording client, pinned to the manager at addr
// (Managers[at]).
type recClient struct {
	w    *Workload
	rec  *Recorder
	id   int
	at   int
	addr string
	c    *client.Client
	rnd  *rand.Rand
	n    int
	// healthy: the last call was answered. A client whose last call
	// failed only reads until one is answered, so that a manager gone
	// (or a cluster without a leader) leaves at most one write of
	// unknown outcome per client, not one a call: each such write may
	// take effect at any later time, which the checker has to try.
	healthy bool
	// failing: since when the calls fail (zero: they do not).
	failing time.Time
	// moved: the client moved to another manager and has had no answer
	// since.
	moved bool
	// wrote: when the client last wrote.
	wrote time.Time
}

// dial pins the client to Managers[at].
func (c *recClient) dial(ctx context.Context) error {
	if c.c != nil {
		c.c.Close()
	}
	c.addr = c.w.Managers[c.at%len(c.w.Managers)]
	var err error
	c.c, err = client.Dial(ctx, c.w.Config, c.w.ConfigPath, client.WithOnlyManager(c.addr), client.WithRounds(1),
		client.WithAttemptTimeout(callTimeout), client.WithChangeAttemptTimeout(callTimeout))
	return err
}

func (c *recClient) run(ctx context.Context) {
	pause := c.w.Pause
	if pause == 0 {
		pause = 20 * time.Millisecond
	}
	for ctx.Err() == nil {
		answered := c.step(ctx)
		wait := pause
		switch {
		case answered:
			if c.moved {
				c.w.logf("history: client %d answered through manager %s", c.id, c.addr)
			}
			c.failing, c.moved = time.Time{}, false
		case c.failing.IsZero():
			c.failing = time.Now()
		case time.Since(c.failing) > repin && ctx.Err() == nil:
			c.at++
			c.failing = time.Time{}
			if err := c.dial(ctx); err != nil {
				c.w.logf("history: client %d: %v", c.id, err)
				return
			}
			if !c.moved {
				c.w.logf("history: client %d: no answer for %s: trying the next managers, from %s", c.id, repin, c.addr)
			}
			c.moved = true
		}
		if !answered {
			wait = 200 * time.Millisecond
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// step makes one call, drawn at random, records it and says whether it
// was answered.
func (c *recClient) step(ctx context.Context) bool {
	c.n++
	w := c.w
	var choices []func(context.Context) error
	// A client writes only after its last call was answered, and not
	// more often than WritePause.
	write := c.healthy && time.Since(c.wrote) >= w.WritePause
	if len(w.Nodes) > 0 {
		choices = append(choices, c.listNodes, c.getNode, c.getNode)
		if write {
			choices = append(choices, c.writeLabel)
		}
		if w.Availability && write {
			choices = append(choices, c.writeAvailability)
		}
	}
	if len(w.Roles) > 0 && write && c.rnd.IntN(10) == 0 {
		choices = append(choices, c.promoteOrDemote)
	}
	if w.groupCount() > 0 {
		choices = append(choices, c.getGroup, c.getRollout)
		if write && c.rnd.IntN(3) == 0 {
			choices = append(choices, c.commitGroup)
		}
	}
	if len(choices) == 0 {
		return true
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	err := choices[c.rnd.IntN(len(choices))](cctx)
	c.healthy = err == nil || refused(err)
	return c.healthy
}

func (c *recClient) via(call string) string { return fmt.Sprintf("%s c%d via %s", call, c.id, c.addr) }

// write records a write of value to key made by do.
func (c *recClient) write(ctx context.Context, key, value, call string, do func(ctx context.Context) error) error {
	c.wrote = time.Now()
	in := Input{Key: key, Kind: Write, Value: value, Call: c.via(call)}
	begin := c.rec.Now()
	err := do(ctx)
	end := c.rec.Now()
	switch {
	case err == nil:
		c.rec.Add(c.id, in, begin, end, Output{})
	case refused(err):
		// Refused before anything was written: not an operation.
	default:
		c.rec.Add(c.id, in, begin, end, Output{Unknown: true})
	}
	return err
}

// refused says whether err is an answer that the call changed nothing:
// bad input, no such node, a precondition. Any other error (no answer,
// unavailable, a failure after the write) leaves the outcome unknown.
func refused(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.NotFound, codes.FailedPrecondition, codes.AlreadyExists:
		return true
	}
	return errors.Is(err, client.ErrNothingToChange)
}

func (c *recClient) writeLabel(ctx context.Context) error {
	id := c.w.Nodes[c.rnd.IntN(len(c.w.Nodes))]
	v := fmt.Sprintf("c%d-%d", c.id, c.n)
	return c.write(ctx, KeyLabel+id, v, "UpdateNode", func(ctx context.Context) error {
		_, err := c.c.UpdateNode(ctx, id, client.NodeUpdate{LabelAdd: map[string]string{LabelKey: v}})
		return err
	})
}

func (c *recClient) writeAvailability(ctx context.Context) error {
	id := c.w.Nodes[c.rnd.IntN(len(c.w.Nodes))]
	a := []pb.Availability{pb.Availability_AVAILABILITY_ACTIVE, pb.Availability_AVAILABILITY_PAUSE}[c.rnd.IntN(2)]
	return c.write(ctx, KeyAvailability+id, a.String(), "UpdateNode", func(ctx context.Context) error {
		_, err := c.c.UpdateNode(ctx, id, client.NodeUpdate{Availability: a})
		return err
	})
}

func (c *recClient) promoteOrDemote(ctx context.Context) error {
	id := c.w.Roles[c.rnd.IntN(len(c.w.Roles))]
	if c.rnd.IntN(2) == 0 {
		return c.write(ctx, KeyRole+id, "consensus", "PromoteNode", func(ctx context.Context) error {
			_, err := c.c.PromoteNode(ctx, id)
			return err
		})
	}
	return c.write(ctx, KeyRole+id, "-", "DemoteNode", func(ctx context.Context) error {
		resp, err := c.c.DemoteNode(ctx, id)
		if err == nil && resp.GetOutcome() == client.DemoteHandedOver {
			// The next leader finishes it: not done yet.
			return status.Error(codes.Unavailable, "demotion handed over")
		}
		return err
	})
}

func (c *recClient) commitGroup(ctx context.Context) error {
	gs := c.w.groupSpec(c.rnd.IntN(c.w.groupCount()), fmt.Sprintf("c%d-%d", c.id, c.n))
	return c.write(ctx, KeyGroup+gs.Name, spec.GroupConfigSHA(gs.Template), "CommitGroup", func(ctx context.Context) error {
		_, _, err := c.c.CommitGroup(ctx, gs)
		return err
	})
}

// readNodes records the registers of the nodes a read returned. A node
// the read did not return says nothing (a node removed, replaced).
func (c *recClient) readNodes(call string, begin, end int64, nodes []*pb.Node) {
	for _, n := range nodes {
		id := n.GetId()
		role := slices.Contains(c.w.Roles, id)
		if !role && !slices.Contains(c.w.Nodes, id) {
			continue
		}
		for key, v := range nodeValues(n) {
			if keyNode(key, id, c.w, role) {
				c.rec.Add(c.id, Input{Key: key, Kind: Read, Call: c.via(call)}, begin, end, Output{Value: v})
			}
		}
	}
}

func (c *recClient) listNodes(ctx context.Context) error {
	begin := c.rec.Now()
	views, err := c.c.ListNodes(ctx)
	end := c.rec.Now()
	if err != nil {
		return err
	}
	nodes := make([]*pb.Node, 0, len(views))
	for _, v := range views {
		nodes = append(nodes, v.GetNode())
	}
	c.readNodes("ListNodes", begin, end, nodes)
	return nil
}

func (c *recClient) getNode(ctx context.Context) error {
	ids := slices.Concat(c.w.Nodes, c.w.Roles)
	id := ids[c.rnd.IntN(len(ids))]
	begin := c.rec.Now()
	v, err := c.c.GetNode(ctx, id)
	end := c.rec.Now()
	if err != nil {
		return err
	}
	c.readNodes("GetNode", begin, end, []*pb.Node{v.GetNode()})
	return nil
}

func (c *recClient) getGroup(ctx context.Context) error {
	name := groupName(c.rnd.IntN(c.w.groupCount()))
	begin := c.rec.Now()
	g, err := c.c.GetGroup(ctx, name)
	end := c.rec.Now()
	if err != nil {
		return err
	}
	c.rec.Add(c.id, Input{Key: KeyGroup + name, Kind: Read, Call: c.via("GetGroup")}, begin, end, Output{Value: g.GetGroup().GetConfigSha()})
	return nil
}

func (c *recClient) getRollout(ctx context.Context) error {
	name := groupName(c.rnd.IntN(c.w.groupCount()))
	begin := c.rec.Now()
	r, err := c.c.GetRollout(ctx, name)
	end := c.rec.Now()
	if err != nil || r.GetTargetSha() == "" {
		return err
	}
	c.rec.Add(c.id, Input{Key: KeyGroup + name, Kind: Read, Call: c.via("GetRollout")}, begin, end, Output{Value: r.GetTargetSha()})
	return nil
}
