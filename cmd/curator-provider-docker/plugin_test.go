package main

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/moby/moby/client"
	"go.uber.org/zap/zaptest"

	"github.com/curatorproject/curator/provider"
	"github.com/curatorproject/curator/provider/docker"
	"github.com/curatorproject/curator/provider/plugin"
	"github.com/curatorproject/curator/provider/providertest"
)

// testConfig is a plugin config of a network of this run's own, on a
// subnet picked at random (networks of other runs may be there), with
// extra keys added.
func testConfig(t *testing.T, extra map[string]string) map[string]string {
	t.Helper()
	name := fmt.Sprintf("cur-plug-%s-%d", runID, rand.IntN(1e6))
	removeNetwork(t, name)
	config := map[string]string{
		"network": name, "image": testImage,
		"subnet": fmt.Sprintf("172.29.%d.0/24", 1+rand.IntN(250)),
	}
	for k, v := range extra {
		config[k] = v
	}
	return config
}

// newPlugin is the docker plugin of config as the leader runs it, closed
// when the test ends.
func newPlugin(t *testing.T, config map[string]string) *plugin.Provider {
	t.Helper()
	p, err := plugin.New(plugin.Config{Path: dockerPlugin, Config: config, Timeout: time.Minute, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// initSpec is a machine that runs `curator agent init`.
func initSpec(labels map[string]string) provider.Spec {
	return provider.Spec{
		Labels: labels,
		Args:   []string{"agent", "init", "--listen", "{{address}}", "--data-dir", "{{data-dir}}", "--election-ttl", "1s"},
	}
}

// TestContract: the docker plugin, run by the leader's side of
// provider/plugin, meets the contract of every provider.
func TestContract(t *testing.T) {
	requireDocker(t)
	config := testConfig(t, nil)
	providertest.Contract(t, providertest.Harness{
		New:      func(t *testing.T) provider.Provider { return newPlugin(t, config) },
		Spec:     initSpec,
		Capacity: 3,
	})
}

// TestEnginesPartial: with two engines, one of which does not answer
// (its socket is not there), List through the plugin returns the other
// engine's machines and a *provider.UnreachableError naming the dark
// engine's domain, not a short list alone; Provision on the live engine
// works.
func TestEnginesPartial(t *testing.T) {
	requireDocker(t)
	config := testConfig(t, map[string]string{"list-timeout": "2s"})
	host := cmp.Or(os.Getenv(client.EnvOverrideHost), client.DefaultDockerHost)
	config["engines"] = fmt.Sprintf("a=%s,%s b=unix://%s/docker.sock", host, config["subnet"], t.TempDir())
	p := newPlugin(t, config)
	labels := map[string]string{provider.LabelCluster: "c", provider.LabelGroup: "g"}
	spec := initSpec(labels)
	spec.Domain = "a"
	in := providertest.Provision(t, p, spec)
	if in.Domain != "a" {
		t.Errorf("machine %s of domain %q, want a", in.ID, in.Domain)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := p.List(ctx, labels)
	ids := []string{}
	for _, g := range got {
		ids = append(ids, g.Domain+"/"+g.ID)
	}
	if diff := gocmp.Diff([]string{"a/" + in.ID}, ids); diff != "" {
		t.Errorf("List with engine b dark (-want +got):\n%s", diff)
	}
	domains, ok := provider.Unreachable(err)
	if !ok || len(domains) != 1 || domains["b"] == nil {
		t.Fatalf("List with engine b dark: %v; want an UnreachableError naming b alone", err)
	}
	t.Logf("engine b: %v", domains["b"])
}

// TestRuns: the docker plugin says what its machines run, as the
// built-in docker provider does: its image, and the image's ID.
func TestRuns(t *testing.T) {
	requireDocker(t)
	config := testConfig(t, nil)
	got, err := newPlugin(t, config).Runs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	builtin, err := docker.New(docker.Config{Image: testImage})
	if err != nil {
		t.Fatal(err)
	}
	defer builtin.Close()
	want, err := builtin.Runs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got.Image != testImage || !strings.HasPrefix(got.Digest, "sha256:") || got != want {
		t.Errorf("Runs through the plugin = %+v, want %+v", got, want)
	}
}
