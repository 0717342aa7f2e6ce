package leader

import (
	"bytes"
	"context"
	"fmt"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

// joinQueue batches the joins of nodes that take no role in consensus
// (workers, and nodes waiting for approval). A wave of machines joining at
// once then costs one etcd transaction per hundred nodes instead of one
// each: the transactions, not the checks, are what a join waits for. A
// manager joins on its own, as it changes etcd's membership first.
type joinQueue struct {
	ch chan *pendingJoin
}

type pendingJoin struct {
	node *pb.Node
	// done receives whether the node had joined already, and the error.
	done chan joinOutcome
}

type joinOutcome struct {
	again bool
	err   error
}

func newJoinQueue() *joinQueue {
	return &joinQueue{ch: make(chan *pendingJoin, 4*store.MaxNodesPerTxn)}
}

// Submit queues node and waits until it is written (or refused).
func (q *joinQueue) Submit(ctx context.Context, st *State, node *pb.Node) (again bool, err error) {
	p := &pendingJoin{node: node, done: make(chan joinOutcome, 1)}
	select {
	case q.ch <- p:
	case <-ctx.Done():
		return false, ctx.Err()
	case <-st.Ctx.Done():
		return false, spec.ErrNotLeader
	}
	select {
	case out := <-p.done:
		return out.again, out.err
	case <-ctx.Done():
		return false, ctx.Err()
	case <-st.Ctx.Done():
		return false, spec.ErrNotLeader
	}
}

// runJoins writes queued joins, as many as are waiting (up to one
// transaction's worth) at a time.
func (st *State) runJoins(ctx context.Context) error {
	supervisor.Signal(ctx, supervisor.Healthy)
	for {
		var batch []*pendingJoin
		select {
		case <-ctx.Done():
			return ctx.Err()
		case p := <-st.Joins.ch:
			batch = append(batch, p)
		}
	more:
		for len(batch) < store.MaxNodesPerTxn {
			select {
			case p := <-st.Joins.ch:
				batch = append(batch, p)
			default:
				break more
			}
		}
		if err := st.writeJoins(ctx, batch); err != nil {
			return err
		}
	}
}

// writeJoins checks each join against the registry and the rest of the
// batch, writes those that pass in one transaction, and answers each.
func (st *State) writeJoins(ctx context.Context, batch []*pendingJoin) error {
	st.Lead.MuNodes.Lock()
	defer st.Lead.MuNodes.Unlock()
	names, addrs, ids := map[string]string{}, map[string]string{}, map[string]bool{}
	var write []*pb.Node
	var written []*pendingJoin
	for _, p := range batch {
		n := p.node
		again, err := CheckJoin(st.Reg, n)
		switch {
		case err == nil && !again && ids[n.Id]:
			// The same node twice in one batch (a retry): once is enough.
			again = true
		case err == nil && !again && ids[n.Name]:
			err = fmt.Errorf("%w: the name %s is the ID of a node joining now: pick another --name", spec.ErrInvalid, spec.QuoteShort(n.Name))
		case err == nil && !again && names[n.Name] != "":
			err = fmt.Errorf("%w: the name %q is taken by node %s: pick another --name", spec.ErrExists, n.Name, names[n.Name])
		case err == nil && !again && addrs[n.Address] != "":
			err = fmt.Errorf("%w: the address %s is taken by node %s: pick another --listen, or remove that node", spec.ErrExists, n.Address, addrs[n.Address])
		}
		if err != nil || again {
			p.done <- joinOutcome{again: again, err: err}
			continue
		}
		names[n.Name], addrs[n.Address], ids[n.Id] = n.Id, n.Id, true
		write = append(write, n)
		written = append(written, p)
	}
	err := store.NodeJoinAll(ctx, st.Lead.Fence, write)
	for _, p := range written {
		p.done <- joinOutcome{err: err}
	}
	return err
}

// CheckJoin checks node, about to join, against the registry: again is
// true for a retry of a registration that went through (same key, same
// node: its certificate is handed out again). Call with muNodes.
func CheckJoin(reg *store.Registry, node *pb.Node) (again bool, err error) {
	if n := reg.Node(node.Id); n != nil {
		if !bytes.Equal(n.PublicKey, node.PublicKey) || n.State == pb.NodeState_NODE_STATE_DECOMMISSIONED {
			return false, fmt.Errorf("%w: node %s was removed from this cluster: wipe its data dir to join as a new node", spec.ErrDenied, node.Id)
		}
		return true, nil
	}
	// Commands take a name wherever they take an ID: one must never read
	// as the other.
	if node.Name == node.Id {
		return false, fmt.Errorf("%w: the name %s is this node's own ID: pick another --name", spec.ErrInvalid, spec.QuoteShort(node.Name))
	}
	if n := reg.Node(node.Name); n != nil {
		return false, fmt.Errorf("%w: the name %s is the ID of node %s: pick another --name", spec.ErrInvalid, spec.QuoteShort(node.Name), n.Id)
	}
	if n := reg.NodeNamed(node.Name); n != nil {
		return false, fmt.Errorf("%w: the name %q is taken by node %s: pick another --name", spec.ErrExists, node.Name, n.Id)
	}
	if n := reg.NodeAt(node.Address); n != nil {
		if node.InstanceId != "" {
			// A provider's machine: its provider gave it the address
			// because none of its machines holds it, so the record is a
			// machine's that is gone (killed, not yet found down).
			// Refusing for good would have the group make machine after
			// machine at that address until the record goes.
			return false, fmt.Errorf("%w: the address %s is still named by node %s (%s), whose machine no longer has it: waiting for that record to go (its group removes it once the node is down; a node joined by hand: `curator node rm %s`)",
				spec.ErrAddressHeld, node.Address, n.Id, n.Name, n.Id)
		}
		return false, fmt.Errorf("%w: the address %s is taken by node %s (%s): pick another --listen, or remove that node", spec.ErrExists, node.Address, n.Id, n.Name)
	}
	return false, nil
}
