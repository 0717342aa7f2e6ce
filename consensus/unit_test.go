package consensus

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/curatorproject/curator/internal/testenv"
)

// TestMain checks that the package's tests leave no goroutines behind,
// giving etcd's connections between members of one process time to close.
func TestMain(m *testing.M) {
	os.Exit(testenv.CheckLeaks(m.Run()))
}

func validConfig() Config {
	return Config{
		NodeID:   "n0",
		DataDir:  "/tmp/x",
		ListenIP: "127.0.0.2",
		Port:     7000,
		CertPEM:  []byte("c"),
		KeyPEM:   []byte("k"),
		CAFile:   "/ca.crt",
		Mode:     ModeBootstrap,
	}
}

func TestConfigValidate(t *testing.T) {
	joinPeers := []Peer{{NodeID: "n1", PeerURL: "https://127.0.0.3:7001"}, {NodeID: "n0", PeerURL: "https://127.0.0.2:7001"}}
	for _, tc := range []struct {
		name   string
		change func(*Config)
		want   string // empty: valid
	}{
		{"valid", func(*Config) {}, ""},
		{"valid join", func(c *Config) { c.Mode = ModeJoin; c.Join = &JoinParams{Peers: joinPeers} }, ""},
		{"valid restart", func(c *Config) { c.Mode = ModeRestart }, ""},
		{"no node ID", func(c *Config) { c.NodeID = "" }, "node ID is empty"},
		{"node ID with comma", func(c *Config) { c.NodeID = "a,b" }, "contains"},
		{"no data dir", func(c *Config) { c.DataDir = "" }, "data dir is empty"},
		{"bad IP", func(c *Config) { c.ListenIP = "localhost" }, "not an IP address"},
		{"wildcard IP", func(c *Config) { c.ListenIP = "0.0.0.0" }, "wildcard"},
		{"port too high", func(c *Config) { c.Port = 65534 }, "out of range"},
		{"port zero", func(c *Config) { c.Port = 0 }, "out of range"},
		{"cert twice", func(c *Config) { c.CertFile = "/c" }, "certificate either as PEM or as a file"},
		{"no key", func(c *Config) { c.KeyPEM = nil }, "key either as PEM or as a file"},
		{"join without params", func(c *Config) { c.Mode = ModeJoin }, "needs join parameters"},
		{"params without join", func(c *Config) { c.Join = &JoinParams{Peers: joinPeers} }, "join parameters given with start mode bootstrap"},
		{"join without self", func(c *Config) { c.Mode = ModeJoin; c.Join = &JoinParams{Peers: joinPeers[:1]} }, "not among the peers"},
		{"join at another address", func(c *Config) {
			c.Mode = ModeJoin
			c.Join = &JoinParams{Peers: []Peer{{NodeID: "n0", PeerURL: "https://127.0.0.9:7001"}}}
		}, "added with peer URL https://127.0.0.9:7001, but it listens at https://127.0.0.2:7001"},
		{"unknown mode", func(c *Config) { c.Mode = 7 }, "unknown start mode"},
		{"tick without election", func(c *Config) { c.TickMs = 10 }, "both TickMs and ElectionMs"},
		{"election too short", func(c *Config) { c.TickMs, c.ElectionMs = 100, 200 }, "at least 5 heartbeats"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.change(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate: %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestURLs(t *testing.T) {
	got := []string{PeerURL("127.0.0.2", 7000), ClientURL("127.0.0.2", 7000), PeerURL("::1", 7000)}
	want := []string{"https://127.0.0.2:7001", "https://127.0.0.2:7002", "https://[::1]:7001"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("URLs (-want +got):\n%s", diff)
	}
}

func TestInitialCluster(t *testing.T) {
	p := JoinParams{Peers: []Peer{{"a", "https://1.2.3.4:1"}, {"", "https://1.2.3.5:1"}, {"c", "https://1.2.3.6:1"}}}
	if got, want := p.initialCluster(), "a=https://1.2.3.4:1,=https://1.2.3.5:1,c=https://1.2.3.6:1"; got != want {
		t.Errorf("initialCluster = %q, want %q", got, want)
	}
}

func TestStatusWatcher(t *testing.T) {
	v := newStatusValue()
	w := &StatusWatcher{v: v}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	// The first Get returns at once.
	if st, err := w.Get(ctx); err != nil || st.State != Stopped {
		t.Fatalf("first Get: %+v, %v", st, err)
	}
	// Then Get blocks until a change.
	short, cancelShort := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancelShort()
	if _, err := w.Get(short); err == nil {
		t.Error("Get without a change returned")
	}
	v.set(Status{State: Stopped}) // no change
	got := make(chan Status, 1)
	go func() {
		st, _ := w.Get(ctx)
		got <- st
	}()
	v.set(Status{State: Starting})
	if st := <-got; st.State != Starting {
		t.Errorf("Get after a change: %+v, want starting", st)
	}
	// Changes in between are coalesced into the latest.
	v.set(Status{State: Learner, MemberID: 1})
	v.set(Status{State: Voter, MemberID: 1})
	if st, err := w.Get(ctx); err != nil || st != (Status{State: Voter, MemberID: 1}) {
		t.Errorf("Get after two changes: %+v, %v; want the latest", st, err)
	}
}

func TestStateString(t *testing.T) {
	got := []string{Stopped.String(), Starting.String(), Learner.String(), Voter.String(), State(9).String(), ModeJoin.String()}
	want := []string{"stopped", "starting", "learner", "voter", "State(9)", "join"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestEtcdSignals(t *testing.T) {
	removedErr := errors.New("the member has been permanently removed from the cluster")
	for _, tc := range []struct {
		name                  string
		log                   func(lg *zap.Logger)
		removed, otherCluster bool
	}{
		{"removed", func(lg *zap.Logger) { lg.Warn("server error", zap.Error(removedErr)) }, true, false},
		{"removed, error in With", func(lg *zap.Logger) { lg.With(zap.Error(removedErr)).Warn("server error") }, true, false},
		{"another message mentioning removal", func(lg *zap.Logger) {
			lg.Warn("rejected stream from remote peer because it was removed", zap.Error(removedErr))
		}, false, false},
		{"removal at info", func(lg *zap.Logger) { lg.Info("server error", zap.Error(removedErr)) }, false, false},
		{"our request refused for another cluster", func(lg *zap.Logger) {
			lg.Warn("request sent was ignored by remote peer due to cluster ID mismatch")
		}, false, true},
		{"pipeline request refused for another cluster", func(lg *zap.Logger) {
			lg.Error("request sent was ignored due to cluster ID mismatch")
		}, false, true},
		{"a request of another cluster refused by us", func(lg *zap.Logger) {
			lg.Warn("request cluster ID mismatch")
		}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sig etcdSignals
			// A no-op base logger, as with Config.Logger nil: the signals
			// must not depend on anyone reading the logs.
			tc.log(etcdLogger(zap.NewNop(), zapcore.ErrorLevel, &sig))
			if got := sig.removed.Load(); got != tc.removed {
				t.Errorf("removed = %v, want %v", got, tc.removed)
			}
			if got := sig.otherCluster.Load(); got != tc.otherCluster {
				t.Errorf("otherCluster = %v, want %v", got, tc.otherCluster)
			}
		})
	}
}

func TestEtcdLogLevel(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	lg := etcdLogger(zap.New(core), zapcore.WarnLevel, &etcdSignals{})
	lg.Info("chatty")
	lg.Warn("kept")
	lg.Error("kept too")
	var got []string
	for _, e := range logs.All() {
		got = append(got, e.LoggerName+": "+e.Message)
	}
	if diff := cmp.Diff([]string{"etcd: kept", "etcd: kept too"}, got); diff != "" {
		t.Errorf("etcd logs kept (-want +got):\n%s", diff)
	}
}
