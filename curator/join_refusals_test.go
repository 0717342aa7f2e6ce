package curator

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/curatorproject/curator/curator/store"
	"github.com/curatorproject/curator/pki"
	pb "github.com/curatorproject/curator/proto"
)

// refusedJoins are the join-refused events in etcd.
func refusedJoins(t *testing.T, c *testCluster) []*pb.Event {
	t.Helper()
	all, _, err := store.EventsAfter(callCtx(t), c.cli, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []*pb.Event
	for _, ev := range all {
		if ev.Loop == "joins" && ev.Action == "join-refused" {
			out = append(out, ev)
		}
	}
	return out
}

// askedName is the name a refused join's event says it asked for.
func askedName(reason string) string {
	const asked = "it asked for the name "
	_, name, _ := strings.Cut(reason, asked)
	return name
}

// TestRefusedJoinsAreEvents: a join with a wrong secret, through the
// leader, and one with another cluster's token, through a follower, are
// each refused and leave an event that says from where and why, with no
// part of the token's secret; each is counted. A hundred more bad joins
// from the same address leave no more events (one per address and reason
// a minute), but are counted.
func TestRefusedJoinsAreEvents(t *testing.T) {
	c := newTestCluster(t)
	cfg := c.curatorConfig(c.first, c.cli)
	core, logs := observer.New(zap.WarnLevel)
	cfg.Logger = zap.New(zapcore.NewTee(cfg.Logger.Core(), core))
	leader, _ := c.leadWith(cfg)
	admin, anon := c.dialFirst()
	m2, _ := c.register(anon, c.token(admin, "manager"), "m2")
	c.startCurator(m2, c.etcdClient())
	viaFollower := dial(t, m2.address, nil, c.root.Cert)
	good := c.token(admin, "worker")
	wrong, foreign := wrongSecret(t, good), foreignToken(t, good)
	secrets := map[string]string{}
	for name, tok := range map[string]string{"wrong": wrong, "foreign": foreign, "good": good} {
		p, err := pki.ParseToken(tok)
		if err != nil {
			t.Fatal(err)
		}
		secrets[name] = p.Secret
	}

	key, _ := newKey(t)
	if _, err := registerKey(anon, key, wrong, "guess", freeAddress(t)); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("Register with a wrong secret: %v, want PermissionDenied", err)
	}
	waitFor(t, "the leader answers through the follower", func() bool {
		_, err := registerKey(viaFollower, key, foreign, "stranger", freeAddress(t))
		return status.Code(err) == codes.PermissionDenied
	})
	evs := refusedJoins(t, c)
	var got []string
	for _, ev := range evs {
		text := fmt.Sprint(ev)
		for name, secret := range secrets {
			if strings.Contains(text, secret) {
				t.Errorf("the event shows the %s token's secret: %s", name, text)
			}
		}
		if !strings.Contains(ev.Reason, "a join from 127.") {
			t.Errorf("the event does not say from where: %q", ev.Reason)
		}
		switch {
		case strings.Contains(ev.Reason, "another cluster's"):
			got = append(got, "other-cluster "+askedName(ev.Reason))
		case strings.Contains(ev.Reason, "neither of this cluster's"):
			got = append(got, "wrong-secret "+askedName(ev.Reason))
		default:
			got = append(got, ev.Reason)
		}
	}
	want := []string{`wrong-secret "guess"`, `other-cluster "stranger"`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("refused-join events (-want +got):\n%s", diff)
	}
	var logged []string
	for _, e := range logs.FilterMessage("refused a join").All() {
		f := e.ContextMap()
		if !strings.HasPrefix(fmt.Sprint(f["peer"]), "127.") {
			t.Errorf("the log line of a refused join does not say from where: %v", f)
		}
		logged = append(logged, fmt.Sprintf("%v %v", f["reason"], f["name"]))
	}
	if diff := cmp.Diff([]string{`wrong-secret "guess"`, `other-cluster "stranger"`}, logged); diff != "" {
		t.Errorf("refused-join log lines (-want +got):\n%s", diff)
	}
	for reason, n := range map[joinRefusal]float64{refusedSecret: 1, refusedOtherCluster: 1} {
		if got := metricValue(t, leader.metrics.JoinsRefused.WithLabelValues(string(reason))); got < n {
			t.Errorf("curator_joins_refused_total{reason=%s} = %v, want at least %v", reason, got, n)
		}
	}

	// A storm: the events stay as they were, the count goes on.
	before := metricValue(t, leader.metrics.JoinsRefused.WithLabelValues(string(refusedSecret)))
	for i := range 100 {
		conn := anon
		if i%2 == 1 {
			conn = viaFollower
		}
		if _, err := registerKey(conn, key, wrong, fmt.Sprintf("guess-%d", i), freeAddress(t)); status.Code(err) != codes.PermissionDenied {
			t.Fatalf("bad join %d: %v, want PermissionDenied", i, err)
		}
	}
	if n := logs.FilterMessage("refused a join").Len(); n != len(logged) {
		t.Errorf("100 bad joins from one address made %d more log lines, want none within a minute of the first", n-len(logged))
	}
	if n := len(refusedJoins(t, c)); n != len(evs) {
		t.Errorf("100 bad joins from one address made %d more events, want none within a minute of the first", n-len(evs))
	}
	if got := metricValue(t, leader.metrics.JoinsRefused.WithLabelValues(string(refusedSecret))) - before; got != 100 {
		t.Errorf("the storm counted %v refused joins, want 100", got)
	}
}

// TestRefusalLimiter: an event per address and reason per interval, then
// one that counts the refusals in between; at most max keys, the rest
// shared.
func TestRefusalLimiter(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := refusalKey{host: "10.0.0.1", reason: refusedSecret}
	type step struct {
		key        refusalKey
		at         time.Duration
		ok         bool
		suppressed int
		host       string
	}
	for _, tc := range []struct {
		name  string
		max   int
		steps []step
	}{
		{"one address", 10, []step{
			{a, 0, true, 0, "10.0.0.1"},
			{a, time.Second, false, 0, "10.0.0.1"},
			{a, 59 * time.Second, false, 0, "10.0.0.1"},
			{a, time.Minute, true, 2, "10.0.0.1"},
			{a, 2*time.Minute + time.Second, true, 0, "10.0.0.1"},
		}},
		{"reasons and addresses apart", 10, []step{
			{a, 0, true, 0, "10.0.0.1"},
			{refusalKey{"10.0.0.1", refusedOtherCluster}, 0, true, 0, "10.0.0.1"},
			{refusalKey{"10.0.0.2", refusedSecret}, 0, true, 0, "10.0.0.2"},
			{a, time.Second, false, 0, "10.0.0.1"},
		}},
		{"full: the rest shared", 2, []step{
			{a, 0, true, 0, "10.0.0.1"},
			{refusalKey{"10.0.0.2", refusedSecret}, 0, true, 0, "10.0.0.2"},
			{refusalKey{"10.0.0.3", refusedSecret}, 0, true, 0, otherHosts},
			{refusalKey{"10.0.0.4", refusedSecret}, time.Second, false, 0, otherHosts},
			// Once the old keys are past the interval they are forgotten.
			{refusalKey{"10.0.0.5", refusedSecret}, time.Minute, true, 0, "10.0.0.5"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newRefusalLimiter()
			l.max = tc.max
			for i, s := range tc.steps {
				ok, suppressed, key := l.allow(s.key, t0.Add(s.at))
				if ok != s.ok || suppressed != s.suppressed || key.host != s.host {
					t.Errorf("step %d (%v at %v): %v, %d, %s; want %v, %d, %s", i, s.key, s.at, ok, suppressed, key.host, s.ok, s.suppressed, s.host)
				}
			}
			if len(l.slots) > tc.max+1 {
				t.Errorf("%d keys held, max %d and the shared one", len(l.slots), tc.max)
			}
		})
	}
}
