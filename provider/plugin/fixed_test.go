package plugin

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"

	"github.com/curatorproject/curator/provider"
)

// fixed is the provider the test binary serves when a test starts it as
// a plugin (selfPlugin): its List answers fixedInstances, with the
// domains of fixedUnreachable unreachable when config["partial"] is set.
type fixed struct {
	partial bool
}

var fixedInstances = []provider.Instance{
	{ID: "m-1", Labels: map[string]string{provider.LabelGroup: "g"}, Address: "127.0.0.1:7000", Domain: "a", Created: time.Unix(1700000000, 0).UTC()},
	{ID: "m-2", Labels: map[string]string{provider.LabelGroup: "g"}, Address: "127.0.0.2:7000", Domain: "a", Created: time.Unix(1700000001, 0).UTC()},
}

var fixedUnreachable = map[string]string{"b": "engine b did not answer within 5s", "c": "connection refused"}

// fixedRuns is what fixedRunner's machines run.
var fixedRuns = provider.Runs{Image: "curator:v9", Digest: "sha256:0123abcd"}

// fixedRunner is fixed that says what its machines run (config["runs"]
// set).
type fixedRunner struct{ fixed }

func (f *fixedRunner) Runs(context.Context) (provider.Runs, error) { return fixedRuns, nil }

func newFixed(config map[string]string) (provider.Provider, error) {
	f := fixed{partial: config["partial"] != ""}
	if config["runs"] != "" {
		return &fixedRunner{f}, nil
	}
	return &f, nil
}

func (f *fixed) Provision(context.Context, provider.Spec) (provider.Instance, error) {
	return provider.Instance{}, errors.New("fixed: provisions nothing")
}

func (f *fixed) Destroy(context.Context, string) error { return nil }

func (f *fixed) List(context.Context, map[string]string) ([]provider.Instance, error) {
	if !f.partial {
		return fixedInstances, nil
	}
	ue := &provider.UnreachableError{Domains: map[string]error{}}
	for d, why := range fixedUnreachable {
		ue.Domains[d] = errors.New(why)
	}
	return fixedInstances, ue
}

// selfPlugin is the Provider of this test binary run as a plugin, serving
// fixed with config.
func selfPlugin(t *testing.T, config map[string]string) *Provider {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return newExec(t, Config{Path: self, Config: config, Timeout: 10 * time.Second, Logger: zaptest.NewLogger(t)})
}

// TestListPartial: a plugin whose List could reach some failure domains
// only answers what it listed and the others, and the leader's side
// returns the same machines with a *provider.UnreachableError naming the
// same domains; a whole list has no error.
func TestListPartial(t *testing.T) {
	for _, partial := range []bool{true, false} {
		config := map[string]string{}
		if partial {
			config["partial"] = "1"
		}
		p := selfPlugin(t, config)
		got, err := p.List(context.Background(), map[string]string{provider.LabelGroup: "g"})
		if diff := cmp.Diff(fixedInstances, got); diff != "" {
			t.Errorf("partial %v: List (-want +got):\n%s", partial, diff)
		}
		domains, ok := provider.Unreachable(err)
		if !partial {
			if err != nil {
				t.Errorf("a whole List: %v", err)
			}
			continue
		}
		if !ok {
			t.Fatalf("a partial List: %v; want a *provider.UnreachableError", err)
		}
		gotWhy := map[string]string{}
		for d, why := range domains {
			gotWhy[d] = why.Error()
		}
		if diff := cmp.Diff(fixedUnreachable, gotWhy); diff != "" {
			t.Errorf("unreachable domains (-want +got):\n%s", diff)
		}
	}
}

// TestRuns: a plugin whose provider says what its machines run answers
// Runs with it; one that does not answers Unimplemented, which the
// leader's side returns as ErrNoRelease, the plugin left running.
func TestRuns(t *testing.T) {
	p := selfPlugin(t, map[string]string{"runs": "1"})
	got, err := p.Runs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fixedRuns, got); diff != "" {
		t.Errorf("Runs (-want +got):\n%s", diff)
	}

	p = selfPlugin(t, nil)
	if _, err := p.Runs(context.Background()); !errors.Is(err, ErrNoRelease) {
		t.Errorf("Runs of a plugin that does not say: %v; want ErrNoRelease", err)
	}
	pid := p.pid()
	if _, err := p.List(context.Background(), nil); err != nil || p.pid() != pid || pid == 0 {
		t.Errorf("after an Unimplemented Runs: List %v, pid %d then %d; want the same plugin answering", err, pid, p.pid())
	}
}
