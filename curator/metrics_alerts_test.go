package curator

import (
	"context"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
)

// alertRules is the file of the alerting rules the repository ships.
const alertRules = "../deploy/prometheus/curator-alerts.yaml"

// describedNames records the name of every metric registered with it,
// whether or not it has a value yet (a vector with no labels set is not
// gathered).
type describedNames map[string]bool

func (d describedNames) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	for desc := range ch {
		if m := fq.FindStringSubmatch(desc.String()); m != nil {
			d[m[1]] = true
		}
	}
	return nil
}

func (d describedNames) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = d.Register(c)
	}
}

func (d describedNames) Unregister(prometheus.Collector) bool { return false }

// TestAlertRulesNameRealMetrics: every metric the alerting rules name (in
// an expression or an annotation) is one NewMetrics registers, so that a
// renamed metric fails here, not silently in an operator's Prometheus.
func TestAlertRulesNameRealMetrics(t *testing.T) {
	data, err := os.ReadFile(alertRules)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatalf("%s: %v", alertRules, err)
	}
	have := describedNames{}
	NewMetrics(have)
	name := regexp.MustCompile(`\bcurator_[a-z0-9_]*[a-z0-9]\b`)
	rules := 0
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			rules++
			if !strings.Contains(r.Expr, "curator_") {
				t.Errorf("alert %s: its expression %q names no curator metric", r.Alert, r.Expr)
			}
			text := r.Expr
			for _, a := range r.Annotations {
				text += "\n" + a
			}
			for _, n := range name.FindAllString(text, -1) {
				base := n
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if b, ok := strings.CutSuffix(n, suffix); ok && have[b] {
						base = b
					}
				}
				if !have[base] {
					t.Errorf("alert %s names %s, which NewMetrics does not register", r.Alert, n)
				}
			}
		}
	}
	if rules == 0 {
		t.Fatalf("%s holds no rule", alertRules)
	}
}

// gathered is every sample of reg whose name has one of prefixes, as
// name{label="value",...} to its value.
func gathered(t *testing.T, reg prometheus.Gatherer, prefixes ...string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(mf.GetName(), p) }) {
			continue
		}
		for _, m := range mf.Metric {
			var labels []string
			for _, l := range m.Label {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(labels)
			key := mf.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.Gauge != nil:
				out[key] = m.Gauge.GetValue()
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			}
		}
	}
	return out
}

// waitGathered waits until reg's samples of prefixes are want.
func waitGathered(t *testing.T, what string, reg prometheus.Gatherer, want map[string]float64, prefixes ...string) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		got := gathered(t, reg, prefixes...)
		diff := cmp.Diff(want, got)
		if diff == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: metrics (-want +got):\n%s", what, diff)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLeaderMetricsQuorumAndCA: the leader exports the quorum's failure
// tolerance and its voters (one voter: a majority of one, no failure
// tolerated), and drops both when it stops leading; every manager exports
// when the CA expires.
func TestLeaderMetricsQuorumAndCA(t *testing.T) {
	c := newTestCluster(t)
	reg := prometheus.NewPedanticRegistry()
	cfg := c.curatorConfig(c.first, c.cli)
	cfg.Metrics = NewMetrics(reg)
	_, stop := c.leadWith(cfg)
	waitGathered(t, "leading", reg, map[string]float64{
		"curator_quorum_failures_tolerated{}":        0,
		"curator_quorum_voters{}":                    1,
		"curator_ca_cert_expiry_timestamp_seconds{}": float64(c.root.Cert.NotAfter.Unix()),
	}, "curator_quorum_", "curator_ca_")
	stop()
	waitGathered(t, "no longer leading", reg, map[string]float64{
		"curator_ca_cert_expiry_timestamp_seconds{}": float64(c.root.Cert.NotAfter.Unix()),
	}, "curator_quorum_", "curator_ca_")
}

// TestLeaderMetricsGroups: the leader exports each group's rollout (its
// state, when it last moved on, its progress deadline) and what holds its
// repairs, follows their changes, and drops a group's gauges once the
// group is gone.
func TestLeaderMetricsGroups(t *testing.T) {
	c := newTestCluster(t)
	reg := prometheus.NewPedanticRegistry()
	cfg := c.curatorConfig(c.first, c.cli)
	cfg.Metrics = NewMetrics(reg)
	c.leadWith(cfg)

	started := time.Unix(1_700_000_000, 0)
	step := started.Add(90 * time.Second)
	// web's rollout is paused (held: the loop leaves its record alone),
	// its last machine replaced at step; its repairs are held and it is
	// suspended.
	web := processGroup(t, "web", 0, "/bin/true")
	web.RepairHeld = "max_unhealthy 0 reached"
	web.Suspended = "a restore"
	putGroup(t, c, web, &pb.Rollout{Group: "web", TargetSha: web.ConfigSha, State: pb.RolloutState_ROLLOUT_STATE_PAUSED,
		Started: timestamppb.New(started), StepStarted: timestamppb.New(step), Rolled: 1})
	// api has no rollout.
	putGroup(t, c, processGroup(t, "api", 0, "/bin/true"), nil)
	want := map[string]float64{
		"curator_rollout_state{group=web,state=paused}":                 1,
		"curator_rollout_progress_timestamp_seconds{group=web}":         float64(step.Unix()),
		"curator_rollout_progress_deadline_seconds{group=web}":          180,
		"curator_group_repairs_held{group=web,reason=repair-ceiling}":   1,
		"curator_group_repairs_held{group=web,reason=suspended}":        1,
		"curator_group_repairs_held{group=web,reason=provider-failing}": 0,
		"curator_group_repairs_held{group=web,reason=crash-backoff}":    0,
		"curator_group_repairs_held{group=web,reason=domain-dark}":      0,
		"curator_group_repairs_held{group=api,reason=repair-ceiling}":   0,
		"curator_group_repairs_held{group=api,reason=suspended}":        0,
		"curator_group_repairs_held{group=api,reason=provider-failing}": 0,
		"curator_group_repairs_held{group=api,reason=crash-backoff}":    0,
		"curator_group_repairs_held{group=api,reason=domain-dark}":      0,
	}
	waitGathered(t, "two groups", reg, want, "curator_rollout_state", "curator_rollout_progress_", "curator_group_")

	// web is resumed and rolls again, from now.
	web.Suspended, web.RepairHeld = "", ""
	now := time.Now().Truncate(time.Second)
	putGroup(t, c, web, &pb.Rollout{Group: "web", TargetSha: web.ConfigSha, State: pb.RolloutState_ROLLOUT_STATE_ROLLING,
		Started: timestamppb.New(now)})
	// A size-0 group's rollout is done at once: the gauge says so.
	delete(want, "curator_rollout_state{group=web,state=paused}")
	want["curator_rollout_state{group=web,state=done}"] = 1
	want["curator_rollout_progress_timestamp_seconds{group=web}"] = float64(now.Unix())
	want["curator_group_repairs_held{group=web,reason=repair-ceiling}"] = 0
	want["curator_group_repairs_held{group=web,reason=suspended}"] = 0
	waitGathered(t, "web resumed and rolled", reg, want, "curator_rollout_state", "curator_rollout_progress_", "curator_group_")

	// web is gone.
	if _, err := c.cli.Delete(context.Background(), store.Keys.Group("web")); err != nil {
		t.Fatal(err)
	}
	for k := range want {
		if strings.Contains(k, "group=web") {
			delete(want, k)
		}
	}
	waitGathered(t, "web gone", reg, want, "curator_rollout_state", "curator_rollout_progress_", "curator_group_")
}
