package curator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/curatorproject/curator/consensus"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/supervisor"
)

// Quorum loss, stated. When a majority of the etcd voters is gone, etcd has
// no leader and nothing can be read or written; every call a surviving
// manager forwards fails to find the curator leader. Rather than leave an
// operator with "cannot read the election (context deadline exceeded)", a
// manager that finds no curator leader asks its own etcd member, which
// answers without a quorum: is there an etcd leader, and which of the
// voters answer? When too few do, the call fails with ErrQuorum saying so,
// which managers answer, and what to do. /healthz says the same.

// QuorumAdvice is what to do about a lost quorum.
const QuorumAdvice = "restart the stopped managers; if they are gone for good, stop the agent of one surviving manager and restart it with `curator agent run --data-dir DIR --force-new-cluster`, then join new managers (or restore a backup: `curator agent restore`)"

// DevQuorumAdvice is what to do about a lost quorum of the dev cluster in
// dir (`curator dev --dir DIR`): there, `agent run --force-new-cluster` by
// hand fights dev for the instance, and `dev --force-new-cluster` is the
// command.
func DevQuorumAdvice(dir string) string {
	return "restart the dev cluster (curator dev --dir " + dir + "); if its managers are gone for good, stop dev and run `curator dev --dir " + dir + " --force-new-cluster` (or restore a backup: `curator agent restore`)"
}

// StartingQuorumLost is quorumLost for a manager whose etcd is still
// starting (consensus.StartingVoters): it cannot join its cluster without
// a majority of the voters, so it serves nothing, and only /healthz can
// say why.
func StartingQuorumLost(voters []consensus.StartingVoter) (bool, string) {
	qv := make([]quorumVoter, len(voters))
	for i, v := range voters {
		qv[i] = quorumVoter{nodeID: v.NodeID, address: addressFromPeerURL(v.PeerURL), answers: v.Answers, self: v.Self}
	}
	lost, msg := quorumLost(qv)
	if !lost {
		return false, ""
	}
	return true, "this manager's etcd is starting and cannot join its cluster: " + msg
}

// quorumProbeTimeout bounds each question quorum checks ask an etcd member.
const quorumProbeTimeout = 500 * time.Millisecond

// quorumVoter is an etcd voter as the quorum check sees it.
type quorumVoter struct {
	nodeID  string
	name    string
	address string
	// answers: its etcd answered (this manager's own always does).
	answers bool
	self    bool
}

// quorumLost says whether voters (every voter of the cluster) have lost
// their quorum, and if so, the message that says so: who answers, who does
// not, and what to do.
func quorumLost(voters []quorumVoter) (bool, string) {
	var up, down []string
	for _, v := range sortedVoters(voters) {
		label := v.label()
		if v.answers {
			up = append(up, label)
		} else {
			down = append(down, label)
		}
	}
	need := spec.Majority(len(voters))
	if len(up) >= need {
		return false, ""
	}
	msg := fmt.Sprintf("etcd has no leader: %d of its %d voters answer, and a majority needs %d. Answering: %s. Not answering (stopped, or cut off from this manager): %s. To recover, %s",
		len(up), len(voters), need, listOrNone(up), listOrNone(down), QuorumAdvice)
	return true, msg
}

func sortedVoters(voters []quorumVoter) []quorumVoter {
	out := append([]quorumVoter(nil), voters...)
	sort.Slice(out, func(i, j int) bool {
		return out[i].name+"\x00"+out[i].nodeID < out[j].name+"\x00"+out[j].nodeID
	})
	return out
}

func (v quorumVoter) label() string {
	var who []string
	if v.address != "" {
		who = append(who, v.address)
	}
	if v.self {
		who = append(who, "this manager")
	}
	name := v.name
	if name == "" {
		name = v.nodeID
	}
	if name == "" {
		name = "an unnamed member"
	}
	if len(who) == 0 {
		return name
	}
	return name + " (" + strings.Join(who, ", ") + ")"
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// quorumCheckEvery is how often a manager asks its etcd member about the
// quorum (runQuorumCheck). When etcd has a leader that is one local Status
// call; only without a leader does it ask the other voters.
const quorumCheckEvery = time.Second

// quorumStale is how old a quorum check may be and still be believed.
const quorumStale = 5 * quorumCheckEvery

// errQuorumUnknown: no recent quorum check to go by.
var errQuorumUnknown = errors.New("the quorum has not been checked yet")

// quorumCache is what CheckQuorum last found, and when.
type quorumCache struct {
	mu  sync.Mutex
	at  time.Time
	err error
}

// runQuorumCheck keeps the quorum cache current, so that a call this
// curator cannot serve, and /healthz, say at once whether the quorum is
// lost, without asking etcd each time (forwarded calls come in waves:
// every node's streams after a leader change).
func (s *Service) runQuorumCheck(ctx context.Context) error {
	supervisor.Signal(ctx, supervisor.Healthy)
	t := time.NewTicker(quorumCheckEvery)
	defer t.Stop()
	for {
		err := s.CheckQuorum(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.quorum.mu.Lock()
		s.quorum.at, s.quorum.err = s.cfg.Now(), err
		s.quorum.mu.Unlock()
		s.updateHealth()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Quorum says what the last quorum check found, at once: nil when etcd has
// a leader, an error wrapping ErrQuorum when too few voters answer, and
// another error when the check could not tell or is not recent.
func (s *Service) Quorum() error {
	s.quorum.mu.Lock()
	defer s.quorum.mu.Unlock()
	if s.quorum.at.IsZero() || s.cfg.Now().Sub(s.quorum.at) > quorumStale {
		return errQuorumUnknown
	}
	return s.quorum.err
}

// quorumLost is the last check's error if it found the quorum lost, else
// nil.
func (s *Service) quorumLost() error {
	if err := s.Quorum(); errors.Is(err, spec.ErrQuorum) {
		return err
	}
	return nil
}

// CheckQuorum asks this manager's etcd member whether the cluster has a
// quorum. It returns nil when the member knows an etcd leader, an error
// wrapping ErrQuorum when too few voters answer, and another error when it
// cannot tell (etcd has no leader, yet a majority answers: an election is
// under way).
func (s *Service) CheckQuorum(ctx context.Context) error {
	cli := s.cfg.Etcd
	eps := cli.Endpoints()
	if len(eps) == 0 {
		return fmt.Errorf("%w: this manager has no etcd endpoint", spec.ErrNoLeader)
	}
	sctx, cancel := context.WithTimeout(ctx, quorumProbeTimeout)
	st, err := cli.Status(sctx, eps[0])
	cancel()
	if err != nil {
		return fmt.Errorf("%w: this manager's etcd does not answer (%v)", spec.ErrNoLeader, err)
	}
	if st.Leader != 0 {
		return nil
	}
	self := st.Header.GetMemberId()
	// Serializable reads are answered by this member alone, leader or not:
	// its view may be stale, which is good enough to name names.
	mctx, cancel := context.WithTimeout(ctx, quorumProbeTimeout)
	defer cancel()
	ml, err := cli.MemberList(mctx, clientv3.WithSerializable())
	if err != nil {
		return fmt.Errorf("%w: etcd has no leader, and this manager cannot list its members (%v)", spec.ErrNoLeader, err)
	}
	byID := map[string][2]string{} // node ID → name, address
	if nodes, err := store.NodeListLocal(mctx, cli); err == nil {
		for _, n := range nodes {
			byID[n.Id] = [2]string{n.Name, n.Address}
		}
	}
	var (
		mu     sync.Mutex
		voters []quorumVoter
		wg     sync.WaitGroup
	)
	for _, m := range ml.Members {
		if m.IsLearner {
			continue
		}
		v := quorumVoter{nodeID: m.Name, self: m.ID == self}
		v.name, v.address = byID[m.Name][0], byID[m.Name][1]
		if v.address == "" && len(m.PeerURLs) > 0 {
			v.address = addressFromPeerURL(m.PeerURLs[0])
		}
		if v.self || len(m.ClientURLs) == 0 {
			v.answers = v.self
			mu.Lock()
			voters = append(voters, v)
			mu.Unlock()
			continue
		}
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, quorumProbeTimeout)
			defer cancel()
			_, err := cli.Status(pctx, m.ClientURLs[0])
			v.answers = err == nil
			mu.Lock()
			voters = append(voters, v)
			mu.Unlock()
		})
	}
	wg.Wait()
	if lost, msg := quorumLost(voters); lost {
		return fmt.Errorf("%w: %s", spec.ErrQuorum, msg)
	}
	return fmt.Errorf("%w: etcd has no leader, though a majority of its voters answer: an election is under way; retry in a few seconds", spec.ErrNoLeader)
}

// addressFromPeerURL is the node address (gRPC, PORT) of an etcd peer URL
// (PORT+1), for a member with no node record.
func addressFromPeerURL(u string) string {
	host, port, err := net.SplitHostPort(strings.TrimPrefix(u, "https://"))
	if err != nil {
		return ""
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return ""
	}
	return net.JoinHostPort(host, strconv.Itoa(p-1))
}
