package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// What the partition tests watch while a fault lasts: the node list and
// the cluster info through the CLI, as an operator sees them, and every
// manager's /healthz, as a load balancer sees it. The watch records; the
// test decides what it may have seen (report).

const (
	// nodePollEvery and infoPollEvery: how often the watch lists the
	// nodes and reads the cluster info (each poll starts that long after
	// the one before it started, or at once if that one took longer).
	nodePollEvery = 150 * time.Millisecond
	infoPollEvery = 200 * time.Millisecond
	// healthzPollEvery and healthzTimeout: how often every manager's
	// /healthz is read, and how long one may take; one that does not
	// answer in time (a frozen process) counts as not leading.
	healthzPollEvery = 50 * time.Millisecond
	healthzTimeout   = 150 * time.Millisecond
	// maxLeaderOverlap: the longest two managers may both say they lead
	// (from the first /healthz round in which two did to the first in
	// which fewer did).
	maxLeaderOverlap = 200 * time.Millisecond
	// maxBlind: the longest the watch may go without the cluster
	// answering `node ls`: a control plane that does not answer shows
	// no node down, and must not pass for one that works.
	maxBlind = 10 * time.Second
)

// sighting is when, and how often, a poll showed something it must not.
// maxUnknown bounds how long a live node may show unknown: a new leader's
// wait for its first heartbeat, reconnection included.
const maxUnknown = 5 * time.Second

type sighting struct {
	first, last time.Time
	count       int
	what        string // what the last one showed
}

func (s *sighting) see(at time.Time, what string) {
	if s.count == 0 {
		s.first = at
	}
	s.last, s.what = at, what
	s.count++
}

// leaderSample is a leader the cluster info named, from when on.
type leaderSample struct {
	at time.Time
	id string
}

// overlap is a stretch during which several managers said they lead.
type overlap struct {
	from, to time.Time
	names    []string
}

// watch polls a cluster from start until report.
type watch struct {
	t      *testing.T
	config string
	names  []string          // every node, to be ready unless exempt
	byID   map[string]string // node names by ID
	exempt map[string]bool
	// managers are the managers' names, and healthz their /healthz URLs.
	managers []string
	healthz  map[string]string

	started time.Time
	stop    chan struct{}
	wg      sync.WaitGroup

	mu    sync.Mutex
	fault time.Time // when the fault began; times are reported from it
	// node ls
	nodePolls, nodeAnswers int
	lastNodeAnswer         time.Time
	blind                  time.Duration // the longest stretch without an answer
	blindFrom              time.Time
	lastNodeErr            error
	notReady               map[string]*sighting
	// unknown: live nodes shown unknown. A new leader shows a node it has
	// not heard yet as unknown, not the old leader's ready, until the
	// node's first heartbeat reaches it: a moment after each change of
	// leader, which is no fault (it is never down).
	unknown map[string]*sighting
	// cluster info
	infoPolls, infoAnswers int
	leaders                []leaderSample // each change of the leader named
	unhealthy              sighting       // answers saying quorum is not healthy
	// /healthz
	healthzRounds int
	claims        map[string]int // rounds in which a manager said it leads
	denials       map[string]int // rounds in which it answered that it does not
	silent        map[string]int // rounds in which it did not answer in time
	claimChanges  []string       // each change of who says it leads, for the log
	lastClaim     string
	open          *overlap
	overlaps      []overlap
}

// watch starts polling c. Every node must stay ready except exempt; the
// CLI's config names the managers that are not exempt first, so that it
// asks the side of a partition that has the majority first.
func (c *netCluster) watch(b *baseline, exempt ...string) *watch {
	c.t.Helper()
	var first, last []string
	for _, m := range b.managers {
		if slices.Contains(exempt, m) {
			last = append(last, c.nodes[m].listen)
		} else {
			first = append(first, c.nodes[m].listen)
		}
	}
	w := &watch{
		t:        c.t,
		config:   c.writeConfig(append(first, last...)...),
		names:    b.all,
		byID:     b.byID,
		exempt:   map[string]bool{},
		managers: b.managers,
		healthz:  map[string]string{},
		started:  time.Now(),
		stop:     make(chan struct{}),
		notReady: map[string]*sighting{},
		unknown:  map[string]*sighting{},
		claims:   map[string]int{},
		denials:  map[string]int{},
		silent:   map[string]int{},
	}
	for _, e := range exempt {
		w.exempt[e] = true
	}
	for _, m := range b.managers {
		ip, _, _ := strings.Cut(c.nodes[m].listen, ":")
		w.healthz[m] = fmt.Sprintf("http://%s:%d/healthz", ip, port+3)
	}
	w.lastNodeAnswer = w.started
	w.wg.Add(3)
	go w.loop(nodePollEvery, w.pollNodes)
	go w.loop(infoPollEvery, w.pollInfo)
	go w.loop(healthzPollEvery, w.pollHealthz)
	// However the test ends, the polls end before its nodes are killed
	// (cleanups run last first).
	c.t.Cleanup(w.halt)
	return w
}

func (w *watch) loop(every time.Duration, poll func()) {
	defer w.wg.Done()
	for {
		began := time.Now()
		poll()
		select {
		case <-w.stop:
			return
		case <-time.After(time.Until(began.Add(every))):
		}
	}
}

// halt stops the polls and waits for them; it may be called more than once.
func (w *watch) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
}

// markFault notes when the fault began.
func (w *watch) markFault() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.fault = time.Now()
	return w.fault
}

// rel formats at as seconds since the fault (or since the watch began).
func (w *watch) rel(at time.Time) string {
	ref := w.fault
	if ref.IsZero() {
		ref = w.started
	}
	return fmt.Sprintf("%+.2fs", at.Sub(ref).Seconds())
}

func (w *watch) pollNodes() {
	nodes, err := nodeLs(w.t, w.config)
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.nodePolls++
	if err != nil {
		w.lastNodeErr = err
		if gap := now.Sub(w.lastNodeAnswer); gap > w.blind {
			w.blind, w.blindFrom = gap, w.lastNodeAnswer
		}
		return
	}
	w.nodeAnswers++
	if gap := now.Sub(w.lastNodeAnswer); gap > w.blind {
		w.blind, w.blindFrom = gap, w.lastNodeAnswer
	}
	w.lastNodeAnswer = now
	for _, name := range w.names {
		if w.exempt[name] {
			continue
		}
		n, ok := byName(nodes, name)
		status := n.Status
		if !ok {
			status = "missing"
		}
		if status == "ready" {
			continue
		}
		seen := w.notReady
		if status == "unknown" {
			seen = w.unknown
		}
		s := seen[name]
		if s == nil {
			s = &sighting{}
			seen[name] = s
		}
		s.see(now, status)
	}
}

func (w *watch) pollInfo() {
	info, err := clusterInfo(w.t, w.config)
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.infoPolls++
	if err != nil {
		return
	}
	w.infoAnswers++
	if n := len(w.leaders); n == 0 || w.leaders[n-1].id != info.Leader {
		w.leaders = append(w.leaders, leaderSample{at: now, id: info.Leader})
	}
	if !info.QuorumHealthy {
		voters := make([]string, 0, len(info.Voters))
		for _, id := range info.Voters {
			voters = append(voters, w.name(id))
		}
		w.unhealthy.see(now, fmt.Sprintf("leader %s, voters %s", w.name(info.Leader), strings.Join(voters, ", ")))
	}
}

func (w *watch) pollHealthz() {
	began := time.Now()
	type answer struct {
		name   string
		leader bool
		ok     bool
	}
	answers := make(chan answer, len(w.managers))
	client := &http.Client{Timeout: healthzTimeout}
	for _, m := range w.managers {
		go func() {
			a := answer{name: m}
			resp, err := client.Get(w.healthz[m])
			if err == nil {
				var h healthzJSON
				if resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&h) == nil {
					a.ok, a.leader = true, h.CuratorLeader
				}
				resp.Body.Close()
			}
			answers <- a
		}()
	}
	var claiming []string
	silent := map[string]bool{}
	for range w.managers {
		a := <-answers
		switch {
		case !a.ok:
			silent[a.name] = true
		case a.leader:
			claiming = append(claiming, a.name)
		}
	}
	client.CloseIdleConnections()
	sort.Strings(claiming)

	w.mu.Lock()
	defer w.mu.Unlock()
	w.healthzRounds++
	for _, m := range w.managers {
		switch {
		case silent[m]:
			w.silent[m]++
		case slices.Contains(claiming, m):
			w.claims[m]++
		default:
			w.denials[m]++
		}
	}
	if claim := strings.Join(claiming, "+"); claim != w.lastClaim {
		if claim == "" {
			claim = "nobody"
		}
		w.claimChanges = append(w.claimChanges, fmt.Sprintf("%s %s", w.rel(began), claim))
		w.lastClaim = strings.Join(claiming, "+")
	}
	switch {
	case len(claiming) >= 2 && w.open == nil:
		w.open = &overlap{from: began, names: claiming}
	case len(claiming) < 2 && w.open != nil:
		w.open.to = began
		w.overlaps = append(w.overlaps, *w.open)
		w.open = nil
	}
}

// report stops the watch and fails the test for everything it saw that
// must not be: a node that is not exempt and not ready (in a poll, or in a
// health event since the watch began), quorum said to be unhealthy, two
// managers saying they lead for longer than maxLeaderOverlap, a cluster
// that did not answer for longer than maxBlind.
func (w *watch) report() {
	w.t.Helper()
	w.halt()
	end := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.open != nil {
		w.open.to = end
		w.overlaps = append(w.overlaps, *w.open)
		w.open = nil
	}
	if gap := end.Sub(w.lastNodeAnswer); gap > w.blind {
		w.blind, w.blindFrom = gap, w.lastNodeAnswer
	}
	w.t.Logf("watched %s: node ls answered %d of %d polls, cluster info %d of %d, %d /healthz rounds; longest without an answer %s (from %s)",
		end.Sub(w.started).Round(time.Millisecond), w.nodeAnswers, w.nodePolls, w.infoAnswers, w.infoPolls, w.healthzRounds,
		w.blind.Round(time.Millisecond), w.rel(w.blindFrom))
	w.t.Logf("curator leader per cluster info: %s", w.leaderLog())
	w.t.Logf("who said it leads per /healthz: %s; rounds without an answer in %s: %v",
		strings.Join(w.claimChanges, ", "), healthzTimeout, w.silent)

	var names []string
	for name := range w.notReady {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		s := w.notReady[name]
		w.t.Errorf("%s is live but was shown %s in %d of %d node listings, from %s to %s since the fault",
			name, s.what, s.count, w.nodeAnswers, w.rel(s.first), w.rel(s.last))
	}
	names = names[:0]
	for name := range w.unknown {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		s := w.unknown[name]
		msg := fmt.Sprintf("%s is live and was shown unknown in %d of %d node listings, from %s to %s since the fault",
			name, s.count, w.nodeAnswers, w.rel(s.first), w.rel(s.last))
		if s.last.Sub(s.first) > maxUnknown {
			w.t.Errorf("%s: longer than %s, more than a new leader's wait for its first heartbeats", msg, maxUnknown)
		} else {
			w.t.Log(msg + " (a new leader that had not heard it yet)")
		}
	}
	if w.unhealthy.count > 0 {
		w.t.Errorf("cluster info said quorum is unhealthy in %d of %d answers, from %s to %s (%s), with at most one manager at fault",
			w.unhealthy.count, w.infoAnswers, w.rel(w.unhealthy.first), w.rel(w.unhealthy.last), w.unhealthy.what)
	}
	for _, o := range w.overlaps {
		if d := o.to.Sub(o.from); d > maxLeaderOverlap {
			w.t.Errorf("%s said at once that they lead, for %s (from %s; limit %s): reads answered then may be stale",
				strings.Join(o.names, " and "), d.Round(time.Millisecond), w.rel(o.from), maxLeaderOverlap)
		} else {
			w.t.Logf("%s said at once that they lead, for at most %s (from %s), within %s",
				strings.Join(o.names, " and "), d.Round(time.Millisecond), w.rel(o.from), maxLeaderOverlap)
		}
	}
	if w.blind > maxBlind {
		w.t.Errorf("node ls got no answer for %s (from %s; limit %s); last error: %v",
			w.blind.Round(time.Millisecond), w.rel(w.blindFrom), maxBlind, w.lastNodeErr)
	}

	// The polls sample; the health loop's events record every mark-down,
	// however brief.
	evs, err := events(w.t, w.config)
	if err != nil {
		w.t.Errorf("events: %v", err)
		return
	}
	for _, ev := range evs {
		name := w.name(ev.NodeID)
		if ev.Loop == "health" && ev.Action == "mark-down" && ev.Time != nil && ev.Time.After(w.started) && !w.exempt[name] {
			w.t.Errorf("the health loop of %s marked live node %s down at %s since the fault: %s",
				w.name(ev.Leader), name, w.rel(*ev.Time), ev.Reason)
		}
	}
}

func (w *watch) leaderLog() string {
	var parts []string
	for _, l := range w.leaders {
		parts = append(parts, w.rel(l.at)+" "+w.name(l.id))
	}
	return strings.Join(parts, ", ")
}

// leaderIDs returns every leader the cluster info named while the watch ran.
func (w *watch) leaderIDs() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ids []string
	for _, l := range w.leaders {
		if !slices.Contains(ids, l.id) {
			ids = append(ids, l.id)
		}
	}
	return ids
}

// leaderClaims returns, per manager, in how many /healthz rounds it said it
// leads and in how many it said it does not.
func (w *watch) leaderClaims() (claims, denials map[string]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.claims), maps.Clone(w.denials)
}

// name returns the name of node id ("none" for no node).
func (w *watch) name(id string) string {
	switch {
	case id == "":
		return "none"
	case w.byID[id] != "":
		return w.byID[id]
	}
	return id
}

// waitFor calls check until it returns nil and returns how long that took,
// or check's last error once timeout has passed.
func waitFor(timeout time.Duration, check func() error) (time.Duration, error) {
	began := time.Now()
	for {
		err := check()
		if err == nil {
			return time.Since(began), nil
		}
		if time.Since(began) > timeout {
			return time.Since(began), err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
